#include "dmlops/core/half.hpp"

#include <cstring>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/platform.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops {
namespace {

std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

#if DMLOPS_X86
// F16C paths, compiled for F16C whatever the baseline flags, used only when the CPU has it.
DMLOPS_TARGET("avx,f16c") void half_to_float_f16c(const Half* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i].bits);
}

DMLOPS_TARGET("avx,f16c") void float_to_half_f16c(const float* src, Half* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  // _mm_cvtps_ph, not _cvtss_sh: Clang's _cvtss_sh is a macro with a compound literal (C99).
  for (; i < n; ++i)
    dst[i].bits = static_cast<std::uint16_t>(_mm_cvtsi128_si32(_mm_cvtps_ph(_mm_set_ss(src[i]), _MM_FROUND_TO_NEAREST_INT)));
}
#endif

}  // namespace

float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    // inf, or nan with its payload kept and the quiet bit set (as F16C does)
    return bits_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u));
  }
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_float(sign);
  // subnormal half: normalise into a float exponent
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return bits_float(sign | static_cast<std::uint32_t>(113 - shift) << 23 | ((mantissa & 0x3ffu) << 13));
}

std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t u = float_bits(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or nan (payload truncated, quiet bit set)
    if (magnitude == 0x7f800000u) return sign | 0x7c00u;
    return sign | 0x7e00u | static_cast<std::uint16_t>((magnitude >> 13) & 0x3ffu);
  }
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow
  if (magnitude < 0x38800000u) {
    // result is subnormal or zero: value = magnitude-as-float / 2^-24, rounded to nearest even
    if (magnitude < 0x33000000u) return sign;  // below half the smallest subnormal
    const std::uint32_t exponent = magnitude >> 23;
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14 + (112 - exponent) + 0
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return sign | static_cast<std::uint16_t>(half);
  }
  // normal: rebias the exponent, round the 13 dropped bits to nearest even
  std::uint32_t half = ((magnitude >> 13) - (112u << 10));
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<std::uint16_t>(half);
}

void half_to_float(const Half* src, float* dst, std::size_t count) {
#if DMLOPS_X86
  if (f16c_enabled()) return half_to_float_f16c(src, dst, count);
#endif
  for (std::size_t i = 0; i < count; ++i) dst[i] = half_bits_to_float(src[i].bits);
}

void float_to_half(const float* src, Half* dst, std::size_t count) {
#if DMLOPS_X86
  if (f16c_enabled()) return float_to_half_f16c(src, dst, count);
#endif
  for (std::size_t i = 0; i < count; ++i) dst[i].bits = float_to_half_bits(src[i]);
}

}  // namespace dmlops
