// Vector types for kernels written once over the register width (SimdKernel, cpu.hpp).
//
// Each type Isa has: Isa::Acc (float or double), Isa::kLanes values per register Isa::V, and
//   load(p) / store(p, v)   kLanes values at p (no alignment needed)
//   zero()                  all lanes 0
//   broadcast(p)            every lane *p
//   madd(a, b, c)           a * b + c per lane: one fused rounding on AVX2 / AVX-512, a rounded
//                           product then a rounded sum on the portable type
//   add(a, b)               a + b per lane
//   relu(a)                 a > 0 ? a : 0 per lane (a NaN or a zero gives +0)
//   transpose8(src, ss, dst, ds)   dst[j * ds + i] = src[i * ss + j] for i, j < 8 (an 8 x 8 block)
// The AVX2 and AVX-512 members carry their target attribute: they inline into SimdKernel's
// variant for that ISA (and only there may they run). A lambda inside a kernel does not inherit
// that target: one that holds V values calls the members out of line with the baseline ABI and
// computes garbage (GCC's -Wpsabi note, which this project silences, is the only sign), so
// kernels hand V values to static members, never to lambdas. Include this header only in
// sources that instantiate SimdKernel: it brings in <immintrin.h> on x86. Elsewhere only the
// portable type exists (compilers vectorise its loops for the baseline ISA, NEON on Arm64).
#pragma once

#include <cstdint>

#include "dmlops/core/platform.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

// Kernel bodies written over these types pass vectors between inlined functions of a
// baseline-compiled template. They are always inlined into SimdKernel's variant for that ISA, so
// no such call exists, but compilers check each call as written: Clang refuses a bare AVX
// register passed from a baseline function to one compiled for AVX (an error), so the AVX types'
// V is a struct holding the register (r), which it does not check and which inlining dissolves;
// GCC warns (-Wpsabi) about such calls: silenced. (Only the sources that instantiate SimdKernel
// include this header.)
DMLOPS_IGNORE_PSABI

namespace dmlops {

// The 8 x 8 transpose, one element at a time.
template <class Acc>
void transpose8_scalar(const Acc* src, std::int64_t src_stride, Acc* dst, std::int64_t dst_stride) {
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) dst[j * dst_stride + i] = src[i * src_stride + j];
  }
}

#if DMLOPS_X86
// The float 8 x 8 transpose in eight ymm registers. Each register is loaded as two halves, rows
// i and i + 4 (columns 0-3 or 4-7; the insert from memory does not take Intel's shuffle port),
// which leaves two 4 x 4 transposes within 128-bit lanes (unpack pairs, shuffle quads): 16
// shuffles where loading whole rows took 24 (the halves swapped at the end). Paired, 1 thread:
// the 16-core Xeon's AVX2 kernels ran ResNet-50 and depthwise layers in 0.79-0.90x the time
// (filter packing, channel-interleaved blocks), packing 3x3 512@7's filter took 0.62-0.67x on Zen 5.
DMLOPS_ALWAYS_INLINE DMLOPS_TARGET("avx2") inline void transpose8_avx(const float* src, std::int64_t src_stride, float* dst,
                                                           std::int64_t dst_stride) {
  __m256 r[8], t[8];
  for (int i = 0; i < 4; ++i) {
    const float* low = src + i * src_stride;
    const float* high = src + (i + 4) * src_stride;
    r[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(low)), _mm_loadu_ps(high), 1);
    r[i + 4] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(low + 4)), _mm_loadu_ps(high + 4), 1);
  }
  for (int h = 0; h < 8; h += 4) {  // columns h..h+3: r[h..h+3] hold rows 0-3 | 4-7 of them
    t[h] = _mm256_unpacklo_ps(r[h], r[h + 1]);      // columns 0, 1 of rows 0 and 1 | of rows 4 and 5
    t[h + 1] = _mm256_unpackhi_ps(r[h], r[h + 1]);  // columns 2, 3
    t[h + 2] = _mm256_unpacklo_ps(r[h + 2], r[h + 3]);
    t[h + 3] = _mm256_unpackhi_ps(r[h + 2], r[h + 3]);
    _mm256_storeu_ps(dst + h * dst_stride, _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(1, 0, 1, 0)));
    _mm256_storeu_ps(dst + (h + 1) * dst_stride, _mm256_shuffle_ps(t[h], t[h + 2], _MM_SHUFFLE(3, 2, 3, 2)));
    _mm256_storeu_ps(dst + (h + 2) * dst_stride, _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(1, 0, 1, 0)));
    _mm256_storeu_ps(dst + (h + 3) * dst_stride, _mm256_shuffle_ps(t[h + 1], t[h + 3], _MM_SHUFFLE(3, 2, 3, 2)));
  }
}
#endif

template <class T>
struct SimdPortable {
  using Acc = T;
  static constexpr std::int64_t kLanes = 32 / sizeof(T);
  struct V {
    T v[kLanes];
  };
  static V load(const T* p) {
    V r;
    for (std::int64_t l = 0; l < kLanes; ++l) r.v[l] = p[l];
    return r;
  }
  static void store(T* p, const V& a) {
    for (std::int64_t l = 0; l < kLanes; ++l) p[l] = a.v[l];
  }
  static V zero() { return V{}; }
  static V broadcast(const T* p) {
    V r;
    for (std::int64_t l = 0; l < kLanes; ++l) r.v[l] = *p;
    return r;
  }
  static V madd(const V& a, const V& b, V c) {
    for (std::int64_t l = 0; l < kLanes; ++l) c.v[l] += a.v[l] * b.v[l];
    return c;
  }
  static V add(V a, const V& b) {
    for (std::int64_t l = 0; l < kLanes; ++l) a.v[l] += b.v[l];
    return a;
  }
  static V relu(V a) {
    for (std::int64_t l = 0; l < kLanes; ++l) a.v[l] = a.v[l] > T(0) ? a.v[l] : T(0);
    return a;
  }
  static void transpose8(const T* src, std::int64_t ss, T* dst, std::int64_t ds) { transpose8_scalar(src, ss, dst, ds); }
};

#if DMLOPS_X86
template <>
struct SimdAvx2<float> {
  using Acc = float;
  struct V {  // a struct, not the bare register type: see the top of this file
    __m256 r;
  };
  static constexpr std::int64_t kLanes = 8;
  DMLOPS_TARGET("avx2,fma") static V load(const float* p) { return {_mm256_loadu_ps(p)}; }
  DMLOPS_TARGET("avx2,fma") static void store(float* p, V a) { _mm256_storeu_ps(p, a.r); }
  DMLOPS_TARGET("avx2,fma") static V zero() { return {_mm256_setzero_ps()}; }
  DMLOPS_TARGET("avx2,fma") static V broadcast(const float* p) { return {_mm256_broadcast_ss(p)}; }
  DMLOPS_TARGET("avx2,fma") static V madd(V a, V b, V c) { return {_mm256_fmadd_ps(a.r, b.r, c.r)}; }
  DMLOPS_TARGET("avx2,fma") static V add(V a, V b) { return {_mm256_add_ps(a.r, b.r)}; }
  // max returns its second operand for a NaN or two zeros: x > 0 ? x : 0.
  DMLOPS_TARGET("avx2,fma") static V relu(V a) { return {_mm256_max_ps(a.r, _mm256_setzero_ps())}; }
  DMLOPS_TARGET("avx2,fma") static void transpose8(const float* src, std::int64_t ss, float* dst,
                                                             std::int64_t ds) {
    transpose8_avx(src, ss, dst, ds);
  }
};

template <>
struct SimdAvx2<double> {
  using Acc = double;
  struct V {  // a struct, not the bare register type: see the top of this file
    __m256d r;
  };
  static constexpr std::int64_t kLanes = 4;
  DMLOPS_TARGET("avx2,fma") static V load(const double* p) { return {_mm256_loadu_pd(p)}; }
  DMLOPS_TARGET("avx2,fma") static void store(double* p, V a) { _mm256_storeu_pd(p, a.r); }
  DMLOPS_TARGET("avx2,fma") static V zero() { return {_mm256_setzero_pd()}; }
  DMLOPS_TARGET("avx2,fma") static V broadcast(const double* p) { return {_mm256_broadcast_sd(p)}; }
  DMLOPS_TARGET("avx2,fma") static V madd(V a, V b, V c) { return {_mm256_fmadd_pd(a.r, b.r, c.r)}; }
  DMLOPS_TARGET("avx2,fma") static V add(V a, V b) { return {_mm256_add_pd(a.r, b.r)}; }
  // max returns its second operand for a NaN or two zeros: x > 0 ? x : 0.
  DMLOPS_TARGET("avx2,fma") static V relu(V a) { return {_mm256_max_pd(a.r, _mm256_setzero_pd())}; }
  static void transpose8(const double* src, std::int64_t ss, double* dst, std::int64_t ds) {
    transpose8_scalar(src, ss, dst, ds);
  }
};

template <>
struct SimdAvx512<float> {
  using Acc = float;
  struct V {  // a struct, not the bare register type: see the top of this file
    __m512 r;
  };
  static constexpr std::int64_t kLanes = 16;
  DMLOPS_TARGET("avx512f") static V load(const float* p) { return {_mm512_loadu_ps(p)}; }
  DMLOPS_TARGET("avx512f") static void store(float* p, V a) { _mm512_storeu_ps(p, a.r); }
  DMLOPS_TARGET("avx512f") static V zero() { return {_mm512_setzero_ps()}; }
  // A memory operand of the FMA that reads it ({1to16}): no register, no separate load.
  DMLOPS_TARGET("avx512f") static V broadcast(const float* p) { return {_mm512_set1_ps(*p)}; }
  DMLOPS_TARGET("avx512f") static V madd(V a, V b, V c) { return {_mm512_fmadd_ps(a.r, b.r, c.r)}; }
  DMLOPS_TARGET("avx512f") static V add(V a, V b) { return {_mm512_add_ps(a.r, b.r)}; }
  // max returns its second operand for a NaN or two zeros: x > 0 ? x : 0.
  // (The masked form: GCC 12's _mm512_max_ps starts from an undefined vector, which its
  // -Wmaybe-uninitialized reports wherever the call is inlined.)
  DMLOPS_TARGET("avx512f") static V relu(V a) {
    const __m512 zero = _mm512_setzero_ps();
    return {_mm512_mask_max_ps(zero, 0xFFFF, a.r, zero)};
  }
  DMLOPS_TARGET("avx512f") static void transpose8(const float* src, std::int64_t ss, float* dst,
                                                            std::int64_t ds) {
    transpose8_avx(src, ss, dst, ds);
  }
};

template <>
struct SimdAvx512<double> {
  using Acc = double;
  struct V {  // a struct, not the bare register type: see the top of this file
    __m512d r;
  };
  static constexpr std::int64_t kLanes = 8;
  DMLOPS_TARGET("avx512f") static V load(const double* p) { return {_mm512_loadu_pd(p)}; }
  DMLOPS_TARGET("avx512f") static void store(double* p, V a) { _mm512_storeu_pd(p, a.r); }
  DMLOPS_TARGET("avx512f") static V zero() { return {_mm512_setzero_pd()}; }
  DMLOPS_TARGET("avx512f") static V broadcast(const double* p) { return {_mm512_set1_pd(*p)}; }
  DMLOPS_TARGET("avx512f") static V madd(V a, V b, V c) { return {_mm512_fmadd_pd(a.r, b.r, c.r)}; }
  DMLOPS_TARGET("avx512f") static V add(V a, V b) { return {_mm512_add_pd(a.r, b.r)}; }
  // max returns its second operand for a NaN or two zeros: x > 0 ? x : 0.
  DMLOPS_TARGET("avx512f") static V relu(V a) {  // masked: see the float type's
    const __m512d zero = _mm512_setzero_pd();
    return {_mm512_mask_max_pd(zero, 0xFF, a.r, zero)};
  }
  static void transpose8(const double* src, std::int64_t ss, double* dst, std::int64_t ds) {
    transpose8_scalar(src, ss, dst, ds);
  }
};
#endif

}  // namespace dmlops
