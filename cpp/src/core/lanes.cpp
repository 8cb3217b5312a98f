#include "dmlops/core/lanes.hpp"

#include <algorithm>

#include "dmlops/core/platform.hpp"
#include "dmlops/core/simd.hpp"

namespace dmlops {
namespace {

// The starts of 8-wide blocks covering [0, count), count >= 8: 0, 8, 16, ... and count - 8 last,
// which overlaps the block before unless 8 divides count (its entries then move twice, with the
// same values). The transposing kernels cover whole rows and lane ranges this way, tails included.
template <class Fn>
DMLOPS_ALWAYS_INLINE inline void for_each_block8(std::int64_t count, Fn&& fn) {
  for (std::int64_t i = 0;; i += 8) {
    i = std::min(i, count - 8);
    fn(i);
    if (i + 8 == count) return;
  }
}

template <class Isa>
struct Interleave {
  using Acc = typename Isa::Acc;
  DMLOPS_ALWAYS_INLINE static void run(const Acc* src, std::int64_t lane_stride, std::int64_t column_stride,
                                         std::int64_t used, std::int64_t n, Acc* dst) {
    constexpr std::int64_t L = Isa::kLanes;
    if (lane_stride == 1 && used == L) {  // channels-last: a column is one vector
      for (std::int64_t x = 0; x < n; ++x) Isa::store(dst + x * L, Isa::load(src + x * column_stride));
    } else if (column_stride == 1 && used >= 8 && n >= 8) {  // unit-stride rows: 8 x 8 transposes
      for_each_block8(n, [&](std::int64_t x) {
        for_each_block8(used, [&](std::int64_t l) { Isa::transpose8(src + l * lane_stride + x, lane_stride, dst + x * L + l, L); });
      });
    } else {
      for (std::int64_t x = 0; x < n; ++x) {
        for (std::int64_t l = 0; l < used; ++l) dst[x * L + l] = src[l * lane_stride + x * column_stride];
      }
    }
    if (used < L) {
      for (std::int64_t x = 0; x < n; ++x) std::fill(dst + x * L + used, dst + (x + 1) * L, Acc(0));
    }
  }
};

template <class Isa>
struct Deinterleave {
  using Acc = typename Isa::Acc;
  DMLOPS_ALWAYS_INLINE static void run(const Acc* src, std::int64_t src_stride, std::int64_t n, std::int64_t used,
                                         Acc* dst, std::int64_t lane_stride, std::int64_t column_stride) {
    constexpr std::int64_t L = Isa::kLanes;
    if (lane_stride == 1 && used == L) {
      for (std::int64_t x = 0; x < n; ++x) Isa::store(dst + x * column_stride, Isa::load(src + x * src_stride));
      return;
    }
    if (column_stride == 1 && used >= 8 && n >= 8) {
      for_each_block8(n, [&](std::int64_t x) {
        for_each_block8(used, [&](std::int64_t l) {
          Isa::transpose8(src + x * src_stride + l, src_stride, dst + l * lane_stride + x, lane_stride);
        });
      });
      return;
    }
    if (used >= 8 && n >= 8) {  // strided columns (e.g. one phase of a transposed convolution's output):
      // 8 x 8 transposes into a block, then each lane's 8 values stored along its row, so
      // that the stores of a lane run through one row instead of hopping between the planes.
      Acc block[8 * 8];
      for_each_block8(n, [&](std::int64_t x) {
        for_each_block8(used, [&](std::int64_t l) {
          Isa::transpose8(src + x * src_stride + l, src_stride, block, 8);
          for (std::int64_t i = 0; i < 8; ++i) {
            Acc* row = dst + (l + i) * lane_stride + x * column_stride;
DMLOPS_UNROLL(8)
            for (std::int64_t j = 0; j < 8; ++j) row[j * column_stride] = block[i * 8 + j];
          }
        });
      });
      return;
    }
    for (std::int64_t x = 0; x < n; ++x) {
      for (std::int64_t l = 0; l < used; ++l) dst[l * lane_stride + x * column_stride] = src[x * src_stride + l];
    }
  }
};

template <class Isa>
struct WindowSum {
  using Acc = typename Isa::Acc;
  using V = typename Isa::V;
  static constexpr int kBlock = 8;  // outputs per pass (for_each_block8): eight FMA chains hide the FMA latency

  // The bias (when given) added to kCount sums, stored to out.
  template <int kCount>
  DMLOPS_ALWAYS_INLINE static void finish(V* acc, const Acc* bias, Acc* out) {
    if (bias) {
      const V b = Isa::load(bias);
DMLOPS_UNROLL(8)
      for (int j = 0; j < kCount; ++j) acc[j] = Isa::add(acc[j], b);
    }
DMLOPS_UNROLL(8)
    for (int j = 0; j < kCount; ++j) Isa::store(out + j * Isa::kLanes, acc[j]);
  }

  template <int kCount>
  DMLOPS_ALWAYS_INLINE static void outputs(std::int64_t taps, const Acc* base, const std::int64_t* tap_offsets,
                                             const std::int64_t* positions, const Acc* weights, const Acc* bias,
                                             Acc* out) {
    constexpr std::int64_t L = Isa::kLanes;
    const Acc* window[kCount];
    V acc[kCount];
DMLOPS_UNROLL(8)
    for (int j = 0; j < kCount; ++j) window[j] = base + positions[j], acc[j] = Isa::zero();
    for (std::int64_t t = 0; t < taps; ++t) {
      const V w = Isa::load(weights + t * L);
      const std::int64_t offset = tap_offsets[t];
DMLOPS_UNROLL(8)
      for (int j = 0; j < kCount; ++j) acc[j] = Isa::madd(Isa::load(window[j] + offset), w, acc[j]);
    }
    finish<kCount>(acc, bias, out);
  }

  // kCount outputs of a kTaps window whose weights the caller holds in registers.
  template <int kCount, int kTaps>
  DMLOPS_ALWAYS_INLINE static void outputs_held(const Acc* base, const std::int64_t* tap_offsets,
                                                  const std::int64_t* positions, const V* w, const Acc* bias, Acc* out) {
    const Acc* window[kCount];
    V acc[kCount];
DMLOPS_UNROLL(8)
    for (int j = 0; j < kCount; ++j) window[j] = base + positions[j], acc[j] = Isa::zero();
DMLOPS_UNROLL(27)
    for (int t = 0; t < kTaps; ++t) {
      const std::int64_t offset = tap_offsets[t];
DMLOPS_UNROLL(8)
      for (int j = 0; j < kCount; ++j) acc[j] = Isa::madd(Isa::load(window[j] + offset), w[t], acc[j]);
    }
    finish<kCount>(acc, bias, out);
  }

  DMLOPS_ALWAYS_INLINE static void run(std::int64_t taps, const Acc* base, const std::int64_t* tap_offsets,
                                         const std::int64_t* positions, std::int64_t n, const Acc* weights,
                                         const Acc* bias, Acc* out) {
    constexpr std::int64_t L = Isa::kLanes;
    if (taps == 9 && n >= kBlock) {  // 3 x 3: the weights stay in registers (with the 8 sums, 17 of AVX-512's 32)
      V w[9];
DMLOPS_UNROLL(9)
      for (int t = 0; t < 9; ++t) w[t] = Isa::load(weights + t * L);
      for_each_block8(n, [&](std::int64_t p) {
        outputs_held<kBlock, 9>(base, tap_offsets, positions + p, w, bias, out + p * L);
      });
      return;
    }
    if (n < kBlock) {
      for (std::int64_t p = 0; p < n; ++p) outputs<1>(taps, base, tap_offsets, positions + p, weights, bias, out + p * L);
      return;
    }
    // Whole blocks, the last one overlapping (its outputs' sums are the same, so their values).
    for_each_block8(n, [&](std::int64_t p) {
      outputs<kBlock>(taps, base, tap_offsets, positions + p, weights, bias, out + p * L);
    });
  }
};

}  // namespace

void interleave_lanes(const float* src, std::int64_t lane_stride, std::int64_t column_stride, std::int64_t used,
                      std::int64_t n, float* dst) {
  SimdKernel<Interleave, float>::run(src, lane_stride, column_stride, used, n, dst);
}
void interleave_lanes(const double* src, std::int64_t lane_stride, std::int64_t column_stride, std::int64_t used,
                      std::int64_t n, double* dst) {
  SimdKernel<Interleave, double>::run(src, lane_stride, column_stride, used, n, dst);
}

void deinterleave_lanes(const float* src, std::int64_t src_stride, std::int64_t n, std::int64_t used, float* dst,
                        std::int64_t lane_stride, std::int64_t column_stride) {
  SimdKernel<Deinterleave, float>::run(src, src_stride, n, used, dst, lane_stride, column_stride);
}
void deinterleave_lanes(const double* src, std::int64_t src_stride, std::int64_t n, std::int64_t used, double* dst,
                        std::int64_t lane_stride, std::int64_t column_stride) {
  SimdKernel<Deinterleave, double>::run(src, src_stride, n, used, dst, lane_stride, column_stride);
}

void lane_window_sum(std::int64_t taps, const float* base, const std::int64_t* tap_offsets,
                     const std::int64_t* positions, std::int64_t n, const float* weights, const float* bias, float* out) {
  SimdKernel<WindowSum, float>::run(taps, base, tap_offsets, positions, n, weights, bias, out);
}
void lane_window_sum(std::int64_t taps, const double* base, const std::int64_t* tap_offsets,
                     const std::int64_t* positions, std::int64_t n, const double* weights, const double* bias,
                     double* out) {
  SimdKernel<WindowSum, double>::run(taps, base, tap_offsets, positions, n, weights, bias, out);
}

}  // namespace dmlops
