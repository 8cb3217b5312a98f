#include "dmlops/core/lanes.hpp"

#include <algorithm>

#include "dmlops/core/simd.hpp"

// The kernel bodies below pass AVX registers between inlined functions of a baseline-compiled
// template; GCC warns that such a call would change the ABI. They are always inlined into
// SimdKernel's variant for that ISA, so no such call exists.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace dmlops {
namespace {

// Lanes [0, lanes) of columns [0, columns) go through 8 x 8 transposes (when the rows have unit
// stride), the rest (the `rest` loops) one element at a time.
struct TransposedPart {
  std::int64_t lanes = 0, columns = 0;
  TransposedPart(bool unit_rows, std::int64_t used, std::int64_t n) {
    if (unit_rows) lanes = used / 8 * 8, columns = n / 8 * 8;
  }
};

template <class Isa>
struct Interleave {
  using Acc = typename Isa::Acc;
  [[gnu::always_inline]] static void run(const Acc* src, std::int64_t lane_stride, std::int64_t column_stride,
                                         std::int64_t used, std::int64_t n, Acc* dst) {
    constexpr std::int64_t L = Isa::kLanes;
    const TransposedPart part(column_stride == 1, used, n);
    for (std::int64_t x = 0; x < part.columns; x += 8) {
      for (std::int64_t l = 0; l < part.lanes; l += 8) Isa::transpose8(src + l * lane_stride + x, lane_stride, dst + x * L + l, L);
    }
    const auto rest = [&](std::int64_t x0, std::int64_t x1, std::int64_t l0) {
      for (std::int64_t x = x0; x < x1; ++x) {
        const Acc* column = src + x * column_stride;
        Acc* to = dst + x * L;
        for (std::int64_t l = l0; l < used; ++l) to[l] = column[l * lane_stride];
        for (std::int64_t l = std::max(l0, used); l < L; ++l) to[l] = Acc(0);
      }
    };
    if (part.lanes < L) rest(0, part.columns, part.lanes);
    rest(part.columns, n, 0);
  }
};

template <class Isa>
struct Deinterleave {
  using Acc = typename Isa::Acc;
  [[gnu::always_inline]] static void run(const Acc* src, std::int64_t n, std::int64_t used, Acc* dst,
                                         std::int64_t lane_stride, std::int64_t column_stride) {
    constexpr std::int64_t L = Isa::kLanes;
    const TransposedPart part(column_stride == 1, used, n);
    for (std::int64_t x = 0; x < part.columns; x += 8) {
      for (std::int64_t l = 0; l < part.lanes; l += 8) Isa::transpose8(src + x * L + l, L, dst + l * lane_stride + x, lane_stride);
    }
    const auto rest = [&](std::int64_t x0, std::int64_t x1, std::int64_t l0) {
      for (std::int64_t x = x0; x < x1; ++x) {
        const Acc* from = src + x * L;
        Acc* column = dst + x * column_stride;
        for (std::int64_t l = l0; l < used; ++l) column[l * lane_stride] = from[l];
      }
    };
    if (part.lanes < used) rest(0, part.columns, part.lanes);
    rest(part.columns, n, 0);
  }
};

template <class Isa>
struct WindowSum {
  using Acc = typename Isa::Acc;
  using V = typename Isa::V;
  static constexpr int kBlock = 8;  // outputs per pass: eight independent FMA chains hide the FMA latency

  template <int kCount>
  [[gnu::always_inline]] static void outputs(std::int64_t taps, const Acc* base, const std::int64_t* tap_offsets,
                                             const std::int64_t* positions, const Acc* weights, const Acc* bias,
                                             Acc* out) {
    constexpr std::int64_t L = Isa::kLanes;
    const Acc* window[kCount];
    V acc[kCount];
#pragma GCC unroll 8
    for (int j = 0; j < kCount; ++j) window[j] = base + positions[j], acc[j] = Isa::zero();
    for (std::int64_t t = 0; t < taps; ++t) {
      const V w = Isa::load(weights + t * L);
      const std::int64_t offset = tap_offsets[t];
#pragma GCC unroll 8
      for (int j = 0; j < kCount; ++j) acc[j] = Isa::madd(Isa::load(window[j] + offset), w, acc[j]);
    }
    if (bias) {
      const V b = Isa::load(bias);
#pragma GCC unroll 8
      for (int j = 0; j < kCount; ++j) acc[j] = Isa::add(acc[j], b);
    }
#pragma GCC unroll 8
    for (int j = 0; j < kCount; ++j) Isa::store(out + j * L, acc[j]);
  }

  [[gnu::always_inline]] static void run(std::int64_t taps, const Acc* base, const std::int64_t* tap_offsets,
                                         const std::int64_t* positions, std::int64_t n, const Acc* weights,
                                         const Acc* bias, Acc* out) {
    constexpr std::int64_t L = Isa::kLanes;
    if (n < kBlock) {
      for (std::int64_t p = 0; p < n; ++p) outputs<1>(taps, base, tap_offsets, positions + p, weights, bias, out + p * L);
      return;
    }
    // Whole blocks; the last one ends at n (it may recompute some outputs of the one before,
    // with the same sums, so the same values).
    for (std::int64_t p = 0;; p += kBlock) {
      p = std::min(p, n - kBlock);
      outputs<kBlock>(taps, base, tap_offsets, positions + p, weights, bias, out + p * L);
      if (p + kBlock == n) return;
    }
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

void deinterleave_lanes(const float* src, std::int64_t n, std::int64_t used, float* dst, std::int64_t lane_stride,
                        std::int64_t column_stride) {
  SimdKernel<Deinterleave, float>::run(src, n, used, dst, lane_stride, column_stride);
}
void deinterleave_lanes(const double* src, std::int64_t n, std::int64_t used, double* dst, std::int64_t lane_stride,
                        std::int64_t column_stride) {
  SimdKernel<Deinterleave, double>::run(src, n, used, dst, lane_stride, column_stride);
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
