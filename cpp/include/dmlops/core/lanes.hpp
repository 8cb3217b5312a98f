// Channel-interleaved blocks: the arithmetic engine behind depthwise convolution (and any
// operator that applies one small filter per channel).
//
// A block of L = lane_count<Acc>() channels is stored interleaved: position p of lane l at
// block[p * L + l]. One vector register then holds one position of L channels, so a filter
// tap is one vector FMA for L outputs whatever the stride, dilation or row width, and the
// channels of a block never mix. interleave_lanes / deinterleave_lanes move between that
// layout and strided channel rows (8 x 8 transposes for unit-stride rows, plain copies for
// channels-last ones), lane_window_sum computes the outputs.
//
// L follows the vector kernels SimdKernel (cpu.hpp) picks: 16 floats / 8 doubles with AVX-512,
// else 8 floats / 4 doubles. Sums run in increasing tap order, one vector lane per output, so
// results depend neither on L nor on how callers cut positions into calls; the AVX2 and AVX-512
// kernels give the same bits (one FMA per term), the portable one rounds products and sums apart.
#pragma once

#include <cstdint>

#include "dmlops/core/cpu.hpp"

namespace dmlops {

template <class Acc>
std::int64_t lane_count() {
  return simd_lanes<Acc>();
}

// dst[x * L + l] = src[l * lane_stride + x * column_stride] for x < n and l < used (used <= L),
// and 0 in the lanes [used, L). Strides in elements, any sign.
void interleave_lanes(const float* src, std::int64_t lane_stride, std::int64_t column_stride, std::int64_t used,
                      std::int64_t n, float* dst);
void interleave_lanes(const double* src, std::int64_t lane_stride, std::int64_t column_stride, std::int64_t used,
                      std::int64_t n, double* dst);

// dst[l * lane_stride + x * column_stride] = src[x * src_stride + l] for x < n and l < used: the
// inverse, from positions src_stride apart (L for one block; more when src holds several blocks
// of a position side by side, as direct convolution tiles do).
void deinterleave_lanes(const float* src, std::int64_t src_stride, std::int64_t n, std::int64_t used, float* dst,
                        std::int64_t lane_stride, std::int64_t column_stride);
void deinterleave_lanes(const double* src, std::int64_t src_stride, std::int64_t n, std::int64_t used, double* dst,
                        std::int64_t lane_stride, std::int64_t column_stride);

// A sliding window over an interleaved block, for output positions p < n:
//   out[p * L + l] = (sum over t < taps, in increasing t, of
//                     weights[t * L + l] * base[positions[p] + tap_offsets[t] + l]) + bias[l]
// (offsets in elements, multiples of L; no bias term when bias is null). The geometry lives in
// the offsets: positions[p] is where output p's window starts, tap_offsets[t] where tap t lies
// in it, so strides, dilations and row ends cost nothing here.
void lane_window_sum(std::int64_t taps, const float* base, const std::int64_t* tap_offsets,
                     const std::int64_t* positions, std::int64_t n, const float* weights, const float* bias, float* out);
void lane_window_sum(std::int64_t taps, const double* base, const std::int64_t* tap_offsets,
                     const std::int64_t* positions, std::int64_t n, const double* weights, const double* bias,
                     double* out);

}  // namespace dmlops
