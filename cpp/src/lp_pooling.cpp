// Lp pooling kernel.
//
// Work unit: one output row along the last spatial axis (W), or a block of it, for one
// (n, c, outer output index). The window's taps on the outer axes (D, H) that land inside the
// input select whole input rows (valid_taps: no bounds test per tap). The block is then
// computed by two sweeps over contiguous scratch rows:
//   down:   v[i] = fold over the selected input rows of f(x[i]), for the input columns i the
//           block reads (clipped to the input). Unit-stride aligned rows of the accumulation
//           type are read in place; others (strided, misaligned, float16) are first packed and
//           converted into scratch. Up to three rows are folded per pass.
//   across: acc[o] = fold over the W taps t of v[o*stride + t*dilation - start]. Interior
//           outputs, whose taps all read inside the input, take one fused loop (stride 1 or 2
//           and 2 or 3 taps are compile-time, so it vectorises); the few border outputs loop
//           over their valid_taps.
// Folding is a sum (or a max, for the scaled path below). Sum and max are separable, so each
// input row is read once per output row rather than once per tap.
//
// Norms (Acc = float32 for FLOAT16/FLOAT32, float64 for FLOAT64):
//   p = 1     sum of |x|. Overflows only when the true result does.
//   p >= 2    fast path: S = sum of |x|^p by the two sweeps (|x|^p once per input element:
//             x*x, |x|^3 and x^4 for p = 2, 3 and 4 in the sweep, binary powering over the row
//             otherwise), y = S^(1/p) (sqrt for p = 2; for float sums and p <= 8 a bit-level
//             estimate and Newton steps, vectorised; else pow and one Newton step, per output).
//             Exact unless S overflowed (inf), is NaN, or lies below
//             p * min_normal / epsilon, where terms that fell into the subnormals may have lost
//             more than an ulp of S. Those outputs are repaired, by the scaled method:
//   scaled    m = max |x| per window (the two sweeps with max; max skips NaN), then
//             S' = sum of (|x|/m)^p, y = m * S'^(1/p). Every quotient is <= 1 and the largest
//             is exactly 1, so S' is in [1, taps]: nothing overflows, and what underflows is
//             below epsilon relative to S'. Quotients multiply by 1/m (one division per output);
//             powers by binary powering, one vector pass over the outputs per step. A block
//             with a few outputs to repair has them recomputed one by one (exact_norm(), the
//             scaled method tap by tap); one with many runs the scaled method vectorised, with
//             exact_norm() for windows whose m is 0, inf or subnormal (1/m would overflow).
//             Repairs are rare: huge or tiny magnitudes for the given p, inf/NaN inputs,
//             all-zero windows.
// NaN propagates: sums and products with NaN are NaN, and exact_norm() checks for it. With no
// NaN, an infinite element gives +inf.
#include "dmlops/ops/lp_pooling.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/rows.hpp"
#include "dmlops/core/strided.hpp"
#include "dmlops/core/window.hpp"

namespace dmlops {
namespace {

// A block of one output row reads at most about this many input columns (when stride and
// dilation allow), so its scratch rows stay in L1/L2.
constexpr std::int64_t kSpanTarget = 4096;
constexpr std::int64_t kMaxBlock = 1024;
// Rough work (element operations) below which parallel_for keeps a range on one thread.
constexpr std::int64_t kGrainWork = 1 << 15;
// Input rows folded per pass of the down sweep.
constexpr int kRowsPerPass = 3;

bool is_supported(DataType dtype) {
  return dtype == DataType::Float32 || dtype == DataType::Float16 || dtype == DataType::Float64;
}

std::vector<WindowAxis> validate(const LpPoolingDesc& desc) {
  const std::string& op = desc.op_name;
  validate_tensor_desc(desc.input, (op + ": input").c_str());
  const int rank = desc.input.sizes.size();
  if (rank < 3 || rank > 5)
    fail(op, ": input has ", rank, " dimensions; it must be 4-D (N, C, H, W) or 5-D (N, C, D, H, W) "
         "(3-D (N, C, W) as a dmlops extension)");
  if (!is_supported(desc.input.dtype))
    fail<DTypeError>(op, ": input has dtype ", name(desc.input.dtype),
                     "; supported: float32, float16 and float64 (float64 is a dmlops extension)");
  const int spatial = rank - 2;
  const auto check_count = [&](const Dims& values, const char* field) {
    if (values.size() != spatial)
      fail(op, ": ", field, " has ", values.size(), " entries but the input has ", spatial,
           " spatial dimensions (DimensionCount = rank - 2)");
  };
  check_count(desc.strides, "strides");
  check_count(desc.window_size, "window_size");
  check_count(desc.start_padding, "start_padding");
  check_count(desc.end_padding, "end_padding");
  if (desc.dilations) check_count(*desc.dilations, "dilations");
  if (desc.p < 1) fail(op, ": p is ", desc.p, "; it must be >= 1");
  if (desc.p > kLpPoolingMaxP) fail(op, ": p is ", desc.p, "; P is a UINT, at most ", kLpPoolingMaxP);
  const Dims spatial_in(desc.input.sizes.begin() + 2, desc.input.sizes.end());
  return window_axes(op, "window_size", spatial_in,
                     WindowParams{desc.window_size, desc.strides, desc.dilations.value_or(Dims::filled(spatial, 1)),
                                  desc.start_padding, desc.end_padding});
}

// How the values of a window combine. Both start from 0, which is neutral for sums of
// non-negative terms and for the max of |x|; Max skips NaN (maxps semantics).
struct Sum {
  template <class A>
  static A fold(A a, A b) { return a + b; }
};
struct Max {
  template <class A>
  static A fold(A a, A b) { return b > a ? b : a; }
};

// What the down sweep folds: |x| (p = 1, and the scaled path's max), x*x (p = 2), or values
// already raised to p (p >= 5, by abs_powers), or |x|^3 and x^4 for p = 3 and 4.
struct Magnitude {
  template <class A>
  static A apply(A x) { return std::abs(x); }
};
struct Square {
  template <class A>
  static A apply(A x) { return x * x; }
};
struct Cube {  // |x|^3 with abs_powers' bits, fused for the common p = 3
  template <class A>
  static A apply(A x) { const A a = std::abs(x); return a * a * a; }
};
struct Fourth {  // (x^2)^2, abs_powers' bits for p = 4
  template <class A>
  static A apply(A x) { const A square = x * x; return square * square; }
};
struct Identity {
  template <class A>
  static A apply(A x) { return x; }
};

// ---------------------------------------------------------------------------------------------
// Row kernels: the hot loops, each an always-inline body run through IsaKernel (core/cpu.hpp),
// which compiles it for the baseline and for AVX2 and runs the one the CPU allows.

// v[i] = fold(v[i], F(x0[i]), ..., F(x_{rows-1}[i])) for i < n and rows = 1, 2 or 3; with
// kFirst, v[i] starts from 0 instead of its old value.
template <class Fold, class F, bool kFirst, class A>
DMLOPS_ALWAYS_INLINE inline void fold_rows(A* v, const A* x0, const A* x1, const A* x2, int rows, std::int64_t n) {
  if (rows == 1) {
    for (std::int64_t i = 0; i < n; ++i) v[i] = Fold::fold(kFirst ? A(0) : v[i], F::apply(x0[i]));
  } else if (rows == 2) {
    for (std::int64_t i = 0; i < n; ++i)
      v[i] = Fold::fold(Fold::fold(kFirst ? A(0) : v[i], F::apply(x0[i])), F::apply(x1[i]));
  } else {
    for (std::int64_t i = 0; i < n; ++i)
      v[i] = Fold::fold(Fold::fold(Fold::fold(kFirst ? A(0) : v[i], F::apply(x0[i])), F::apply(x1[i])),
                        F::apply(x2[i]));
  }
}

// acc[k] = fold over taps t of v[k*stride + t*dilation], k < n. Strides 1 and 2 and windows of
// 2 and 3 taps (the common pooling shapes) are compile-time, so the loop vectorises with plain
// or deinterleaving loads; other shapes sweep one tap at a time.
template <class Fold, int kStride, int kTaps, class A>
DMLOPS_ALWAYS_INLINE inline void fold_taps(const A* v, std::int64_t stride, std::int64_t dilation,
                                             std::int64_t taps, A* acc, std::int64_t n) {
  const std::int64_t s = kStride ? kStride : stride;
  if constexpr (kTaps > 0) {
    for (std::int64_t k = 0; k < n; ++k) {
      A a = v[k * s];
      for (int t = 1; t < kTaps; ++t) a = Fold::fold(a, v[k * s + t * dilation]);
      acc[k] = a;
    }
  } else {
    for (std::int64_t k = 0; k < n; ++k) acc[k] = v[k * s];
    for (std::int64_t t = 1; t < taps; ++t) {
      const A* vt = v + t * dilation;
      for (std::int64_t k = 0; k < n; ++k) acc[k] = Fold::fold(acc[k], vt[k * s]);
    }
  }
}

// y[j] = |x[j]|^p for j < n (p >= 3) by left-to-right binary powering, one pass per step.
template <class A>
DMLOPS_ALWAYS_INLINE inline void abs_powers(const A* x, A* y, std::int64_t n, std::uint64_t p) {
  for (std::int64_t j = 0; j < n; ++j) y[j] = std::abs(x[j]);
  for (int bit = std::bit_width(p) - 2; bit >= 0; --bit) {
    for (std::int64_t j = 0; j < n; ++j) y[j] *= y[j];
    if ((p >> bit) & 1) {
      for (std::int64_t j = 0; j < n; ++j) y[j] *= std::abs(x[j]);
    }
  }
}

// Whether every y[k], k < n, is in [lo, hi] (NaN is not); with kSqrt, y[k] = sqrt(y[k]) too,
// in the same pass.
template <bool kSqrt, class A>
DMLOPS_ALWAYS_INLINE inline bool all_within(A* y, std::int64_t n, A lo, A hi) {
  unsigned outside = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    outside |= !(y[k] >= lo) | !(y[k] <= hi);
    if constexpr (kSqrt) y[k] = std::sqrt(y[k]);
  }
  return outside == 0;
}

// |x| / m for |x| <= m, as |x| * (1/m): exactly 1 for the window's largest element, so that its
// power stays 1 for any p, and clamped so that rounding of 1/m never lifts a quotient past 1.
// NaN stays NaN.
template <class A>
A scaled_magnitude(A x, A m, A inverse_m) {
  const A a = std::abs(x);
  const A q = a * inverse_m;
  const A clamped = q > A(1) ? A(1) : q;  // plain selects (NaN takes the second arm): vectorisable
  return a >= m ? A(1) : clamped;
}

// q[j] = scaled_magnitude(x[j*stride], m[j], inverse_m[j]), j < n.
template <int kStride, class A>
DMLOPS_ALWAYS_INLINE inline void scaled_magnitudes(A* q, const A* x, std::int64_t stride, const A* m,
                                                     const A* inverse_m, std::int64_t n) {
  const std::int64_t s = kStride ? kStride : stride;
  for (std::int64_t j = 0; j < n; ++j) q[j] = scaled_magnitude(x[j * s], m[j], inverse_m[j]);
}

// sum[j] += q[j]^p for j < n (p >= 2) by left-to-right binary powering, one pass over the
// (L1-resident) row per squaring and per set bit of p; power is scratch.
template <class A>
DMLOPS_ALWAYS_INLINE inline void add_powers(const A* q, A* power, A* sum, std::int64_t n, std::uint64_t p) {
  for (std::int64_t j = 0; j < n; ++j) power[j] = q[j];
  for (int bit = std::bit_width(p) - 2; bit >= 0; --bit) {
    for (std::int64_t j = 0; j < n; ++j) power[j] *= power[j];
    if ((p >> bit) & 1) {
      for (std::int64_t j = 0; j < n; ++j) power[j] *= q[j];
    }
  }
  for (std::int64_t j = 0; j < n; ++j) sum[j] += power[j];
}

// ---------------------------------------------------------------------------------------------

// The dispatchers pick a compile-time variant; inlined, so that a call costs one IsaKernel call.
template <class Fold, class A>
DMLOPS_ALWAYS_INLINE inline void fold_taps(const A* v, std::int64_t stride, std::int64_t dilation, std::int64_t taps,
                                             A* acc, std::int64_t n) {
  const auto with_stride = [&](auto fixed_stride) {
    constexpr int kStride = decltype(fixed_stride)::value;
    if (taps == 2) return IsaKernel<&fold_taps<Fold, kStride, 2, A>>::run(v, stride, dilation, taps, acc, n);
    if (taps == 3) return IsaKernel<&fold_taps<Fold, kStride, 3, A>>::run(v, stride, dilation, taps, acc, n);
    IsaKernel<&fold_taps<Fold, kStride, 0, A>>::run(v, stride, dilation, taps, acc, n);
  };
  if (stride == 1) return with_stride(std::integral_constant<int, 1>{});
  if (stride == 2) return with_stride(std::integral_constant<int, 2>{});
  with_stride(std::integral_constant<int, 0>{});
}

template <class A>
DMLOPS_ALWAYS_INLINE inline void scaled_magnitudes(A* q, const A* x, std::int64_t stride, const A* m,
                                                     const A* inverse_m, std::int64_t n) {
  if (stride == 1) return IsaKernel<&scaled_magnitudes<1, A>>::run(q, x, stride, m, inverse_m, n);
  if (stride == 2) return IsaKernel<&scaled_magnitudes<2, A>>::run(q, x, stride, m, inverse_m, n);
  IsaKernel<&scaled_magnitudes<0, A>>::run(q, x, stride, m, inverse_m, n);
}

template <class A>
A integer_power(A x, std::uint64_t p) {
  A result = 1;
  for (; p; p >>= 1, x *= x) {
    if (p & 1) result *= x;
  }
  return result;
}

// q^p (p >= 1) by left-to-right binary powering: add_powers' products for one element, so that
// an output repaired alone gets the bits the vectorised scaled method gives it.
template <class A>
A power_like_add_powers(A q, std::uint64_t p) {
  A power = q;
  for (int bit = std::bit_width(p) - 2; bit >= 0; --bit) {
    power *= power;
    if ((p >> bit) & 1) power *= q;
  }
  return power;
}

// s^(1/p) for p >= 3. The exponent 1/p that pow takes is itself rounded, which costs up to
// ln(s) * ulp(1/p) relative: some 15 ulps for s near either end of the range. One Newton step on
// y^p = s removes that: for y = root * (1 + e), r = s / y^p = 1 - p*e + O(e^2), and
// y * (1 + (r - 1) / p) is off by O(e^2) plus the roundings of y^p divided by p (under an ulp).
// y^(p-1) is about s / y, so it stays between s and 1: nothing overflows. Zero, inf and NaN
// (which the caller repairs) take pow alone.
template <class A>
A nth_root(A s, std::uint64_t p, A inverse_p) {
  const A y = std::pow(s, inverse_p);
  if (!(y > 0 && y <= std::numeric_limits<A>::max())) return y;
  const A ratio = s / integer_power(y, p - 1) / y;
  return y + y * ((ratio - 1) / static_cast<A>(p));
}

// The largest p whose roots (float sums) take nth_roots below. Its estimate is off by at most 6%,
// and Newton's error e becomes about (p - 1) / 2 * e^2 a step: the step before the last leaves it
// under 5e-5 (two steps for p <= 4, three for p <= 8), and the last, nth_root's one step, takes
// it to rounding level.
constexpr std::uint64_t kMaxVectorRootP = 8;

// y[k] = s[k]^(1/p) for k < n and 3 <= p <= kMaxVectorRootP, the sums s in y on entry: nth_root's
// result without pow, so that the loop vectorises. The estimate reads the bits of s as a
// piecewise-linear log2 (exponent and mantissa), divides that by p and reads it back (within
// 2^0.086, 6%); then three or four Newton steps, the last in nth_root's form. sums and power
// are scratch. Sums outside the fast path's range (0, inf, NaN, tiny) give some value without
// traps or undefined behaviour (the bits stay in int32's range); the caller repairs them.
DMLOPS_ALWAYS_INLINE inline void nth_roots(float* y, float* sums, float* power, std::int64_t n, std::uint64_t p) {
  constexpr std::int32_t kOne = 0x3f800000;  // the bits of 1.0f
  const float p_float = static_cast<float>(p), inverse_p = 1.0f / p_float;
  for (std::int64_t k = 0; k < n; ++k) {
    sums[k] = y[k];
    const float log2_scaled = static_cast<float>(std::bit_cast<std::int32_t>(y[k]) - kOne) * inverse_p;
    y[k] = std::bit_cast<float>(static_cast<std::int32_t>(log2_scaled) + kOne);
  }
  const int steps = p <= 4 ? 3 : 4;
  for (int step = 1; step <= steps; ++step) {
    // power = y^(p-1), left-to-right binary powering
    for (std::int64_t k = 0; k < n; ++k) power[k] = y[k];
    for (int bit = std::bit_width(p - 1) - 2; bit >= 0; --bit) {
      for (std::int64_t k = 0; k < n; ++k) power[k] *= power[k];
      if (((p - 1) >> bit) & 1) {
        for (std::int64_t k = 0; k < n; ++k) power[k] *= y[k];
      }
    }
    if (step < steps) {
      for (std::int64_t k = 0; k < n; ++k) y[k] += y[k] * ((sums[k] / power[k] / y[k] - 1.0f) * inverse_p);
    } else {
      for (std::int64_t k = 0; k < n; ++k) y[k] += y[k] * ((sums[k] / power[k] / y[k] - 1.0f) / p_float);
    }
  }
}

template <class T>
class LpPoolingKernel {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  static constexpr bool kReadsInPlace = std::is_same_v<T, Acc>;  // rows need no conversion
  static constexpr int kMaxOuter = 2;                             // outer spatial axes (D, H)

 public:
  // `tables`: the per-block and per-row tables run() reads (plan() needs none: they grow with the
  // output, which a plan does not allocate).
  LpPoolingKernel(const std::vector<WindowAxis>& axes, const TensorView& in, const TensorView& out, std::int64_t p,
                  bool tables)
      : in_(in),
        out_(out),
        p_(static_cast<std::uint64_t>(p)),
        row_(axes.back()),
        outer_(static_cast<int>(axes.size()) - 1) {
    for (int a = 0; a < outer_; ++a) {
      outer_axes_[a] = axes[a];
      outer_in_stride_[a] = in.byte_strides[a + 2];
      outer_out_stride_[a] = out.byte_strides[a + 2];
    }
    in_col_stride_ = in.byte_strides[outer_ + 2];
    out_col_stride_ = out.byte_strides[outer_ + 2];
    row_sizes_ = {out.sizes[0], out.sizes[1]};
    // The most input rows a window reads: along each axis its taps inside the input, at most
    // the input's size (a tap a dilation of 1 or more from the last); not the window's own
    // count, which a caller may make 2^32 per axis with padding to match (its product
    // overflowed, and a reserve of it ran out of memory on a 1x1 output).
    outer_taps_ = 1;
    for (int a = 0; a < outer_; ++a) {
      row_sizes_.push_back(outer_axes_[a].out());
      outer_taps_ *= std::min(outer_axes_[a].window, outer_axes_[a].in);
      for (std::int64_t o = 0; o < (tables ? outer_axes_[a].out() : 0); ++o)
        outer_valid_taps_[a].push_back(outer_axes_[a].valid_taps(o));
    }
    // Split each output row into blocks whose input span stays near kSpanTarget columns.
    const std::int64_t cols = row_.out();
    block_ = std::min(cols, std::clamp<std::int64_t>((kSpanTarget - row_.extent()) / row_.stride + 1, 1, kMaxBlock));
    span_ = std::min(row_.in, (block_ - 1) * row_.stride + row_.extent());
    block_count_ = block_ > 0 ? (cols + block_ - 1) / block_ : 0;
    for (std::int64_t o0 = 0; o0 < (tables ? cols : 0); o0 += block_) {
      Block b;
      b.o0 = o0;
      b.o1 = std::min(cols, o0 + block_);
      b.lo = std::max<std::int64_t>(0, row_.input_index(b.o0, 0));
      b.hi = std::min(row_.in, row_.input_index(b.o1 - 1, row_.window - 1) + 1);
      // Tap offsets grow with t: the interior starts where tap 0 enters the input and ends
      // where the last tap leaves it.
      b.i0 = std::clamp(row_.valid_outputs(0).first, b.o0, b.o1);
      b.i1 = std::clamp(row_.valid_outputs(row_.window - 1).second, b.i0, b.o1);
      // Only the border outputs that read the input: the others are zeros (a window padded
      // far past a small input leaves nearly every output so, as many as the output holds).
      const auto add_border = [&](std::int64_t o) {
        const auto [t0, t1] = row_.valid_taps(o);
        if (t0 < t1) b.border.push_back({o, t0, t1});
        else b.zeros = true;
      };
      for (std::int64_t o = b.o0; o < b.i0; ++o) add_border(o);
      for (std::int64_t o = b.i1; o < b.o1; ++o) add_border(o);
      blocks_.push_back(std::move(b));
    }
  }

  // What run() does: the norm's path, the blocking and the tasks.
  KernelPlan describe() const {
    const std::string p = std::to_string(p_);
    KernelPlan k = KernelPlan::of(
        p_ == 1 ? "sum_abs" : p_ == 2 ? "sum_squares" : "sum_powers",
        p_ == 1   ? "p = 1: the sum of |x|"
        : p_ == 2 ? "p = 2: the root of the sum of squares"
                  : "p = " + p + ": the p-th root of the sum of |x|^" + p + " (binary powering)",
        kernel_isa(KernelKind::Avx2), row_sizes_.product() * block_count_);
    if (p_ > 1) k.reason += "; outputs that overflow or lose precision are recomputed scaled by the window's max";
    const bool fixed = (row_.stride == 1 || row_.stride == 2) && (row_.window == 2 || row_.window == 3);
    k.reason += fixed ? "; the " + std::to_string(row_.window) + " taps of stride " + std::to_string(row_.stride) +
                            " along W are compiled in"
                      : "; the taps along W one at a time";
    k.reason += kReadsInPlace && in_col_stride_ == static_cast<std::int64_t>(sizeof(T))
                    ? "; input rows read in place"
                    : "; input rows packed into scratch first";
    k.tiles = {{"rows", row_sizes_.product()}, {"blocks", block_count_}, {"block", block_},
               {"span", span_}, {"outer_taps", outer_taps_}, {"grain", grain()}};
    return k;
  }

  void run() const {
    const std::int64_t blocks = block_count_;
    parallel_for(0, row_sizes_.product() * blocks, grain(), [&](std::int64_t begin, std::int64_t end) {
      Scratch scratch(*this);
      // A chunk's tasks are consecutive (row, block) pairs, block fastest; the counter walks
      // the rows without dividing per row.
      std::int64_t block = begin % blocks;
      NdCounter row(row_sizes_, begin / blocks);
      start_row(row, scratch);
      for (std::int64_t task = begin; task < end; ++task) {
        run_block(scratch, blocks_[static_cast<std::size_t>(block)]);
        if (++block == blocks && task + 1 < end) {
          block = 0;
          row.next();
          start_row(row, scratch);
        }
      }
    });
  }

 private:
  // (row, block) tasks per parallel_for chunk: about kGrainWork element operations.
  std::int64_t grain() const {
    const std::int64_t work = outer_taps_ * span_ + block_ * std::min(row_.window, row_.in);
    return std::max<std::int64_t>(1, kGrainWork / std::max<std::int64_t>(work, 1));
  }

  // One block of an output row: outputs [o0, o1) read input columns [lo, hi) (clipped to the
  // input); outputs [i0, i1) are interior (every W tap inside the input), the rest border.
  struct BorderOutput {
    std::int64_t o, t0, t1;  // the output and its taps inside the input
  };
  struct Block {
    std::int64_t o0, o1, lo, hi, i0, i1;
    std::vector<BorderOutput> border;  // those that read the input
    bool zeros = false;                // some border outputs read only padding
  };

  struct Scratch {
    explicit Scratch(const LpPoolingKernel& k)
        : v(static_cast<std::size_t>(k.span_)),
          values(kReadsInPlace ? 0 : static_cast<std::size_t>(kRowsPerPass * k.span_)),
          packed(static_cast<std::size_t>(kRowsPerPass * k.span_)),
          powered(k.p_ > 2 ? static_cast<std::size_t>(kRowsPerPass * k.span_) : 0),
          acc(static_cast<std::size_t>(k.block_)),
          sum(k.p_ > 1 ? static_cast<std::size_t>(k.block_) : 0),
          inverse(k.p_ > 1 ? static_cast<std::size_t>(k.block_) : 0),
          quotient(k.p_ > 1 ? static_cast<std::size_t>(k.block_) : 0),
          power(k.p_ > 1 ? static_cast<std::size_t>(k.block_) : 0),
          scaled(k.p_ > 1 ? static_cast<std::size_t>(k.block_) : 0),
          result(kReadsInPlace ? 0 : static_cast<std::size_t>(k.block_)) {
      row_offsets.reserve(static_cast<std::size_t>(k.outer_taps_));
      repairs.reserve(static_cast<std::size_t>(k.block_));
    }
    std::vector<Acc> v;       // the down sweep, per input column
    std::vector<Acc> values;  // kRowsPerPass input rows converted to Acc (float16 inputs)
    std::vector<T> packed;    // kRowsPerPass input rows packed contiguously (strided or misaligned inputs)
    std::vector<Acc> powered;  // p >= 3: kRowsPerPass input rows raised to p
    std::vector<Acc> acc;      // per output of the block: p = 1 sums; the scaled path's max |x|
    std::vector<Acc> sum, inverse, quotient, power, scaled;  // p >= 2, per output: the fast path's
                                                             // sums; the scaled path's 1/m, |x|/m,
                                                             // power and results
    std::vector<std::int64_t> repairs;               // outputs of the block to recompute
    std::vector<T> result;    // the block's outputs rounded to float16
    // The current output row: where its (n, c) input plane and its output start, and the byte
    // offsets (from the plane) of the input rows the window's outer taps read.
    const std::byte* plane = nullptr;
    std::byte* out_row = nullptr;
    std::vector<std::int64_t> row_offsets;
  };

  // Points the scratch at output row (n, c, o_0, ..., o_{outer-1}).
  void start_row(const NdCounter& row, Scratch& s) const {
    std::int64_t outer[kMaxOuter] = {}, first[kMaxOuter] = {}, last[kMaxOuter] = {}, tap[kMaxOuter] = {};
    s.plane = static_cast<const std::byte*>(in_.data) + row[0] * in_.byte_strides[0] + row[1] * in_.byte_strides[1];
    s.out_row = static_cast<std::byte*>(out_.data) + row[0] * out_.byte_strides[0] + row[1] * out_.byte_strides[1];
    for (int a = 0; a < outer_; ++a) {
      outer[a] = row[a + 2];
      s.out_row += outer[a] * outer_out_stride_[a];
    }

    // Every combination of valid outer taps, odometer-style.
    s.row_offsets.clear();
    for (int a = 0; a < outer_; ++a) {
      std::tie(first[a], last[a]) = outer_valid_taps_[a][static_cast<std::size_t>(outer[a])];
      if (first[a] >= last[a]) return;  // the window lies in the padding on this axis
      tap[a] = first[a];
    }
    for (;;) {
      std::int64_t offset = 0;
      for (int a = 0; a < outer_; ++a) offset += outer_axes_[a].input_index(outer[a], tap[a]) * outer_in_stride_[a];
      s.row_offsets.push_back(offset);
      int a = outer_ - 1;
      for (; a >= 0; --a) {
        if (++tap[a] < last[a]) break;
        tap[a] = first[a];
      }
      if (a < 0) return;
    }
  }

  // Input columns [lo, lo + n) of the row at `offset`, as Acc; `slot` < kRowsPerPass picks
  // the scratch used when the row cannot be read in place.
  const Acc* row_values(Scratch& s, std::int64_t offset, std::int64_t lo, std::int64_t n, int slot) const {
    const std::byte* first = s.plane + offset + lo * in_col_stride_;
    const T* packed = reinterpret_cast<const T*>(first);
    if (in_col_stride_ != static_cast<std::int64_t>(sizeof(T)) ||
        reinterpret_cast<std::uintptr_t>(first) % alignof(T) != 0) {
      T* dst = s.packed.data() + slot * span_;
      for (std::int64_t i = 0; i < n; ++i) dst[i] = load<T>(first + i * in_col_stride_);
      packed = dst;
    }
    if constexpr (kReadsInPlace) {
      return packed;
    } else {
      Acc* dst = s.values.data() + slot * span_;
      half_to_float(packed, dst, static_cast<std::size_t>(n));
      return dst;
    }
  }

  // The down sweep: v[i] = fold over the window's rows of F(x[lo + i]), for the block's input
  // columns. Returns false (v untouched) when no row or column of the window is inside.
  template <class Fold, class F>
  bool down_the_window(Scratch& s, const Block& b) const {
    const std::size_t rows = s.row_offsets.size();
    const std::int64_t n = b.hi - b.lo;
    if (rows == 0 || n <= 0) return false;
    for (std::size_t r = 0; r < rows; r += kRowsPerPass) {
      const int group = static_cast<int>(std::min<std::size_t>(kRowsPerPass, rows - r));
      const Acc* x[kRowsPerPass] = {};
      for (int g = 0; g < group; ++g) {
        x[g] = row_values(s, s.row_offsets[r + g], b.lo, n, g);
        if constexpr (std::is_same_v<F, Identity>) {  // fold |x|^p: raise the row first
          Acc* raised = s.powered.data() + g * span_;
          IsaKernel<&abs_powers<Acc>>::run(x[g], raised, n, p_);
          x[g] = raised;
        }
      }
      if (r == 0) IsaKernel<&fold_rows<Fold, F, true, Acc>>::run(s.v.data(), x[0], x[1], x[2], group, n);
      else IsaKernel<&fold_rows<Fold, F, false, Acc>>::run(s.v.data(), x[0], x[1], x[2], group, n);
    }
    return true;
  }

  // The across sweep: acc[o - o0] = fold over the W taps of output o of v, or 0 when none is
  // inside the input.
  template <class Fold>
  void across_the_window(const Acc* v, const Block& b, Acc* acc) const {
    if (b.zeros) std::fill(acc, acc + (b.o1 - b.o0), Acc(0));
    for (const BorderOutput& e : b.border) {
      Acc a = 0;
      for (std::int64_t t = e.t0; t < e.t1; ++t) a = Fold::fold(a, v[row_.input_index(e.o, t) - b.lo]);
      acc[e.o - b.o0] = a;
    }
    if (b.i0 < b.i1)
      fold_taps<Fold>(v + (row_.input_index(b.i0, 0) - b.lo), row_.stride, row_.dilation, row_.window,
                      acc + (b.i0 - b.o0), b.i1 - b.i0);
  }

  // Fold (sum or max) of F(x) over each output's window of the block into acc[0 .. o1 - o0).
  template <class Fold, class F>
  void fold_window(Scratch& s, const Block& b, Acc* acc) const {
    if (down_the_window<Fold, F>(s, b)) across_the_window<Fold>(s.v.data(), b, acc);
    else std::fill(acc, acc + (b.o1 - b.o0), Acc(0));
  }

  // Where the block's results are computed: straight in the output row when it holds Acc
  // values at unit stride, aligned; else in `scratch`, for store() to round and scatter.
  Acc* results(Scratch& s, const Block& b, Acc* scratch) const {
    if constexpr (kReadsInPlace) {
      std::byte* first = s.out_row + b.o0 * out_col_stride_;
      if (out_col_stride_ == static_cast<std::int64_t>(sizeof(T)) &&
          reinterpret_cast<std::uintptr_t>(first) % alignof(T) == 0)
        return reinterpret_cast<Acc*>(first);
    }
    return scratch;
  }

  void run_block(Scratch& s, const Block& b) const {
    const std::int64_t count = b.o1 - b.o0;
    if (p_ == 1) {
      Acc* y = results(s, b, s.acc.data());
      fold_window<Sum, Magnitude>(s, b, y);
      return store(s, b.o0, count, y);
    }
    // p >= 2, the fast path: S = sum of |x|^p, y = S^(1/p), then repairs.
    Acc* y = results(s, b, s.sum.data());
    if (p_ == 2) fold_window<Sum, Square>(s, b, y);
    else if (p_ == 3) fold_window<Sum, Cube>(s, b, y);
    else if (p_ == 4) fold_window<Sum, Fourth>(s, b, y);
    else fold_window<Sum, Identity>(s, b, y);
    const Acc lo = kTinySum * static_cast<Acc>(p_), hi = std::numeric_limits<Acc>::max();
    s.repairs.clear();
    if (p_ == 2) {
      // Roots and range test in one pass, on the roots: sqrt is monotonic, so this is the test
      // on the sums up to rounding at the bounds, where either answer is accurate.
      const Acc root_lo = std::sqrt(lo), root_hi = std::sqrt(hi);
      if (!IsaKernel<&all_within<true, Acc>>::run(y, count, root_lo, root_hi)) {
        for (std::int64_t k = 0; k < count; ++k) {
          if (!(y[k] >= root_lo && y[k] <= root_hi)) s.repairs.push_back(k);
        }
      }
    } else {
      if (!IsaKernel<&all_within<false, Acc>>::run(y, count, lo, hi)) {
        for (std::int64_t k = 0; k < count; ++k) {
          if (!(y[k] >= lo && y[k] <= hi)) s.repairs.push_back(k);
        }
      }
      roots(s, y, count);
    }
    // A few repairs one by one; many (a block of huge values for this p, say) vectorised.
    // Either way a repaired output gets the same bits, and the others keep the fast path's, so
    // an output's value never depends on its neighbours (nor on the block or the array's shape).
    if (static_cast<std::int64_t>(s.repairs.size()) * 4 > count) {
      Acc* scaled = s.scaled.data();
      scaled_block(s, b, scaled);
      for (const std::int64_t k : s.repairs) y[k] = scaled[k];
    } else {
      for (const std::int64_t k : s.repairs) y[k] = exact_norm(s, b.o0 + k);
    }
    store(s, b.o0, count, y);
  }

  // y[k] = y[k]^(1/p) for k < count, p >= 3: float sums vectorised while p allows, else per output.
  void roots(Scratch& s, Acc* y, std::int64_t count) const {
    if constexpr (std::is_same_v<Acc, float>) {
      if (p_ <= kMaxVectorRootP) return IsaKernel<&nth_roots>::run(y, s.quotient.data(), s.power.data(), count, p_);
    }
    const Acc inverse_p = Acc(1) / static_cast<Acc>(p_);
    for (std::int64_t k = 0; k < count; ++k) y[k] = nth_root(y[k], p_, inverse_p);
  }

  // The scaled method over the whole block, into y[0 .. o1 - o0) (see the file comment).
  void scaled_block(Scratch& s, const Block& b, Acc* y) const {
    const std::int64_t count = b.o1 - b.o0;
    // Pass 1: m = the window's largest |x| per output.
    Acc* m = s.acc.data();
    fold_window<Max, Magnitude>(s, b, m);
    Acc* inverse_m = s.inverse.data();
    for (std::int64_t k = 0; k < count; ++k) inverse_m[k] = Acc(1) / m[k];
    // Pass 2, row by row: y[o] = sum of (|x| / m[o])^p over the taps.
    std::fill(y, y + count, Acc(0));
    for (std::size_t r = 0; r < s.row_offsets.size() && b.lo < b.hi; ++r) {
      const Acc* x = row_values(s, s.row_offsets[r], b.lo, b.hi - b.lo, 0) - b.lo;  // x[i]: input column i
      for (const BorderOutput& e : b.border) {
        const std::int64_t k = e.o - b.o0;
        for (std::int64_t t = e.t0; t < e.t1; ++t)
          y[k] += power_like_add_powers(scaled_magnitude(x[row_.input_index(e.o, t)], m[k], inverse_m[k]), p_);
      }
      for (std::int64_t t = 0; t < row_.window && b.i0 < b.i1; ++t) {
        const std::int64_t k0 = b.i0 - b.o0, n = b.i1 - b.i0;
        scaled_magnitudes(s.quotient.data(), x + row_.input_index(b.i0, t), row_.stride, m + k0, inverse_m + k0, n);
        IsaKernel<&add_powers<Acc>>::run(s.quotient.data(), s.power.data(), y + k0, n, p_);
      }
    }
    const Acc inverse_p = Acc(1) / static_cast<Acc>(p_);
    for (std::int64_t k = 0; k < count; ++k) {
      const bool scalable = m[k] >= std::numeric_limits<Acc>::min() && m[k] <= std::numeric_limits<Acc>::max();
      y[k] = !scalable ? exact_norm(s, b.o0 + k) : m[k] * (p_ == 2 ? std::sqrt(y[k]) : std::pow(y[k], inverse_p));
    }
  }

  // The norm of output column o of the current row, tap by tap from the input: m = max |x|,
  // then m * (sum (|x|/m)^p)^(1/p). NaN if any tap is NaN; m itself when m is 0 or inf.
  Acc exact_norm(const Scratch& s, std::int64_t o) const {
    // Named variables, not a structured binding: Clang before 16 cannot capture those.
    const std::pair<std::int64_t, std::int64_t> taps = row_.valid_taps(o);
    const std::int64_t first = taps.first, last = taps.second;
    const auto for_each_tap = [&](auto fn) {
      for (const std::int64_t offset : s.row_offsets) {
        for (std::int64_t t = first; t < last; ++t)
          fn(std::abs(to_acc(load<T>(s.plane + offset + row_.input_index(o, t) * in_col_stride_))));
      }
    };
    Acc m = 0;
    bool nan = false;
    for_each_tap([&](Acc a) {
      if (std::isnan(a)) nan = true;
      else if (a > m) m = a;
    });
    if (nan) return std::numeric_limits<Acc>::quiet_NaN();
    if (m == 0 || std::isinf(m)) return m;
    Acc sum = 0;
    if (m >= std::numeric_limits<Acc>::min()) {  // as scaled_block computes it
      const Acc inverse_m = Acc(1) / m;
      for_each_tap([&](Acc a) { sum += power_like_add_powers(scaled_magnitude(a, m, inverse_m), p_); });
    } else {  // a subnormal m: 1/m would overflow
      for_each_tap([&](Acc a) { sum += integer_power(a / m, p_); });
    }
    return m * (p_ == 2 ? std::sqrt(sum) : std::pow(sum, Acc(1) / static_cast<Acc>(p_)));
  }

  static Acc to_acc(T x) {
    if constexpr (std::is_same_v<T, Half>) return half_bits_to_float(x.bits);
    else return x;
  }

  // Writes y[0 .. count) to outputs o0 .. o0 + count of the current row, rounding once to T
  // (nothing to do when results() placed y in the output already).
  void store(Scratch& s, std::int64_t o0, std::int64_t count, const Acc* y) const {
    std::byte* dst = s.out_row + o0 * out_col_stride_;
    const T* values;
    if constexpr (kReadsInPlace) {
      if (reinterpret_cast<const std::byte*>(y) == dst) return;
      values = y;
    } else {
      float_to_half(y, s.result.data(), static_cast<std::size_t>(count));
      values = s.result.data();
    }
    if (out_col_stride_ == static_cast<std::int64_t>(sizeof(T))) {
      std::memcpy(dst, values, static_cast<std::size_t>(count) * sizeof(T));
      return;
    }
    for (std::int64_t k = 0; k < count; ++k) std::memcpy(dst + k * out_col_stride_, values + k, sizeof(T));
  }

  // Fast-path sums below p * kTinySum are repaired (see the file comment).
  static constexpr Acc kTinySum = std::numeric_limits<Acc>::min() / std::numeric_limits<Acc>::epsilon();

  const TensorView& in_;
  const TensorView& out_;
  std::uint64_t p_;
  WindowAxis row_;  // the last spatial axis (W)
  int outer_;       // spatial axes before it
  WindowAxis outer_axes_[kMaxOuter];
  std::vector<std::pair<std::int64_t, std::int64_t>> outer_valid_taps_[kMaxOuter];  // per output index
  std::int64_t outer_in_stride_[kMaxOuter] = {}, outer_out_stride_[kMaxOuter] = {};
  std::int64_t in_col_stride_ = 0, out_col_stride_ = 0;
  Dims row_sizes_;  // {N, C, outer output sizes...}: one output row per index
  std::int64_t block_ = 1, span_ = 1, outer_taps_ = 1, block_count_ = 0;
  std::vector<Block> blocks_;
};

}  // namespace

TensorDesc infer_output(const LpPoolingDesc& desc) {
  const std::vector<WindowAxis> axes = validate(desc);
  TensorDesc expected{desc.input.dtype, {desc.input.sizes[0], desc.input.sizes[1]}, std::nullopt};
  for (const WindowAxis& axis : axes) expected.sizes.push_back(axis.out());
  return checked_output(expected, desc.output, desc.op_name + ": output", " but the window geometry gives ");
}

namespace {

// The kernel for these views: what execute() runs and plan() describes.
template <class Fn>
void with_kernel(const LpPoolingDesc& desc, const TensorView& in, const TensorView& out, bool tables, Fn&& fn) {
  const std::vector<WindowAxis> axes = validate(desc);
  visit_float(in.dtype,
              [&](auto tag) { fn(LpPoolingKernel<typename decltype(tag)::type>(axes, in, out, desc.p, tables)); });
}

}  // namespace

KernelPlan plan(const LpPoolingDesc& desc) {
  const TensorDesc out_desc = infer_output(desc);
  const TensorView in = unbound_view(desc.input), out = unbound_view(out_desc);
  KernelPlan k;
  with_kernel(desc, in, out, false, [&](const auto& kernel) { k = kernel.describe(); });
  return k;
}

void execute(const LpPoolingDesc& desc, const TensorView& in, const TensorView& out) {
  const TensorDesc out_desc = infer_output(desc);
  check_view_matches(in, desc.input, (desc.op_name + ": input").c_str());
  check_output_view(out, out_desc, (desc.op_name + ": out").c_str(), {&in});
  with_kernel(desc, in, out, true, [&](const auto& kernel) {
    if (verbose())
      log_plan(desc.op_name + " p=" + std::to_string(desc.p) + " " + dims_text(in.sizes) + " " +
                   std::string(short_name(in.dtype)) + " window " + dims_text(desc.window_size),
               kernel.describe());
    kernel.run();
  });
}

}  // namespace dmlops
