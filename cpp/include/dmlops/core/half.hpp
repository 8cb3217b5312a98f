// IEEE binary16 ("half") storage and conversion.
// Half is a distinct 2-byte type so that a template over element types never confuses it
// with uint16_t. Conversions use F16C when the CPU has it and an exact scalar fallback
// otherwise; both give the same bits for every input (tested on all 65,536 halves).
// Arithmetic on FLOAT16 tensors happens in float and is rounded once on store.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dmlops {

struct Half {
  std::uint16_t bits;
};

// Scalar conversions (exact; round-to-nearest-even; nan stays nan, quietened).
float half_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_half_bits(float value);

// Bulk conversions, F16C-accelerated when available.
void half_to_float(const Half* src, float* dst, std::size_t count);
void float_to_half(const float* src, Half* dst, std::size_t count);

// The bulk conversions use F16C when f16c_enabled() (core/cpu.hpp).

}  // namespace dmlops
