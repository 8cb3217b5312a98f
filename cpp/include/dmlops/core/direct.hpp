// Direct convolution tiles: the arithmetic engine behind dense forward convolution (many input
// and output channels), reading the input where it lies, with no im2col copy.
//
//   out[p * width + o] (+)= sum over c < channels, then t < taps, of
//                           planes[c][offsets[p] + tap_offsets[t]] * filter[(c * taps + t) * width + o]
//   for output positions p < n and output channels o < width.
//
// planes[c] is input channel c (e.g. its padded plane), offsets[p] where output p's window
// starts in it and tap_offsets[t] where tap t lies in a window: the geometry (strides, dilations,
// rows, padding) lives in the offsets, as in lane_window_sum (lanes.hpp), and a tile of outputs
// may span rows (tiles of 12 positions, and with AVX2 tiles of 6 whose taps come in rows of
// three adjacent ones, as an undilated 3x3 window's, are cut at rows of positions 1 or 2
// elements apart, to address them from one pointer). The output channels are the vector lanes: width = vectors * L, L =
// simd_lanes<float>() and vectors 1, 2 or direct_vectors() (4 with AVX-512, 2 otherwise). Per
// tap, `vectors` registers of weights are loaded once and each input value is broadcast once
// against them, into a register tile of up to 6 x 4 zmm (AVX-512) or 6 x 2 ymm (AVX2) sums: no
// panel padding (channel counts are multiples of 16 in the layers that matter), and no im2col.
//
// Every output is one chain of fused multiply-adds in increasing (c, t), starting from zero or,
// with DirectSums::accumulate, from out, so a caller that splits the channels into blocks gets
// the same chain: the im2col GEMM's (gemm.hpp) order, hence its bits, whatever the tiling, the
// thread count or the ISA (AVX2 vs AVX-512). The portable kernel rounds products and sums apart, as
// the portable GEMM does.
#pragma once

#include <cstdint>

namespace dmlops {

// The most weight vectors per tap a tile holds with the ISA SimdKernel picks.
std::int64_t direct_vectors();

// How a call's sums start and end: from out (`accumulate`) or from zero; and, on a caller's
// last pass over its channels, `bias` (width values, one per output channel) added and a relu
// applied (x > 0 ? x : 0) before they are stored: the operations a pass over the sums after the
// product would apply, in the same order, so the same bits, without reading the sums back.
struct DirectSums {
  bool accumulate = false;
  const float* bias = nullptr;
  bool relu = false;
};

void direct_window_product(std::int64_t channels, std::int64_t taps, const float* const* planes,
                           const std::int64_t* tap_offsets, const std::int64_t* offsets, std::int64_t n,
                           std::int64_t vectors, const float* filter, const DirectSums& sums, float* out);

// The filter layout direct_window_product reads, from rows: dst[k * width + o] = rows[o * ld + k]
// for k < K and o < used (output channel o's K weights are a contiguous row), 0 for o in
// [used, width). Eight by eight transposes.
void pack_direct_filter(const float* rows, std::int64_t ld, std::int64_t used, std::int64_t K, std::int64_t width,
                        float* dst);

}  // namespace dmlops
