// Lp pooling / Lp pooling 1 (docs/semantics/lp_pooling.md).
//
// LpPoolingTester builds one case (shape, window geometry, p, dtype, input values, input and
// output memory layout, thread count), runs dmlops::execute and checks every output against a
// reference written here from the spec's formula: it pads explicitly (a tap whose coordinate
// o*stride + t*dilation - start falls outside the input is skipped), never uses WindowAxis,
// and computes in long double. The TESTs below only enumerate cases.
//
// Tolerances (relative to the reference, per output; taps = the window's size):
//   float32  (taps + 4) * 2^-24: fp32 accumulation of taps terms, a root and a scale
//   float64  (taps + 4) * 2^-53
//   float16  2^-10 + taps * 2^-24: one rounding to half (<= 2^-11 relative) of an fp32 result
// plus, for results in the subnormal range, a few units of the dtype's smallest subnormal.
// NaN must give NaN, inf +inf, 0 exactly 0. AccuracyOfThreeByThreeWindows measures the actual
// float32 error in ulps, which is much smaller.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/dtype.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/lp_pooling.hpp"
#include "test_support.hpp"

namespace dmlops {
namespace {

using testing::float_at;
using testing::Layout;
using testing::message_of;
using testing::store_float;
using testing::StridedBuffer;
using testing::ThreadCountGuard;

using Real = long double;
constexpr Real kNaN = std::numeric_limits<Real>::quiet_NaN();
constexpr Real kInf = std::numeric_limits<Real>::infinity();
constexpr DataType kFloatDtypes[] = {DataType::Float32, DataType::Float16, DataType::Float64};

// The spec's formula for one window, given its taps inside the input: (sum |x|^p)^(1/p),
// evaluated as m * (sum (|x|/m)^p)^(1/p) with m = max |x| so that long double holds it.
Real lp_norm(const std::vector<Real>& taps, std::uint64_t p) {
  Real m = 0;
  for (Real x : taps) {
    if (std::isnan(x)) return kNaN;
    m = std::max(m, std::fabs(x));
  }
  if (m == 0 || std::isinf(m)) return m;
  Real sum = 0;
  for (Real x : taps) sum += std::pow(std::fabs(x) / m, static_cast<Real>(p));
  return m * std::pow(sum, 1.0L / static_cast<Real>(p));
}

class LpPoolingTester {
 public:
  using Values = std::function<double(std::int64_t flat, std::mt19937_64& rng)>;

  LpPoolingTester& sizes(Dims v) { sizes_ = v; return *this; }
  LpPoolingTester& window(Dims v) { window_ = v; return *this; }
  LpPoolingTester& strides(Dims v) { strides_ = v; return *this; }
  LpPoolingTester& dilations(Dims v) { dilations_ = v; return *this; }
  LpPoolingTester& start(Dims v) { start_ = v; return *this; }
  LpPoolingTester& end(Dims v) { end_ = v; return *this; }
  LpPoolingTester& p(std::int64_t v) { p_ = v; return *this; }
  LpPoolingTester& dtype(DataType d) { dtype_ = d; return *this; }
  LpPoolingTester& input_layout(Layout l) { in_layout_ = std::move(l); return *this; }
  LpPoolingTester& output_layout(Layout l) { out_layout_ = std::move(l); return *this; }
  // Input element values by flat (row-major) index; default: normal, scaled by 3, signed.
  LpPoolingTester& values(Values v) { values_ = std::move(v); return *this; }
  LpPoolingTester& threads(int n) { threads_ = n; return *this; }
  LpPoolingTester& seed(std::uint64_t s) { seed_ = s; return *this; }

  // Runs the case and checks it; returns the output bytes (row-major order) for comparisons
  // between runs.
  std::vector<Real> Test() const {
    const int rank = sizes_.size();
    const int spatial = rank - 2;
    EXPECT_EQ(window_.size(), spatial) << "tester misuse";
    const Dims strides = strides_.empty() ? Dims::filled(spatial, 1) : strides_;
    const Dims dilations = dilations_.empty() ? Dims::filled(spatial, 1) : dilations_;
    const Dims start = start_.empty() ? Dims::filled(spatial, 0) : start_;
    const Dims end = end_.empty() ? Dims::filled(spatial, 0) : end_;

    // Output sizes from the spec's formula.
    Dims out_sizes{sizes_[0], sizes_[1]};
    for (int a = 0; a < spatial; ++a) {
      const std::int64_t extent = (window_[a] - 1) * dilations[a] + 1;
      out_sizes.push_back((sizes_[a + 2] + start[a] + end[a] - extent) / strides[a] + 1);
    }

    StridedBuffer in(dtype_, sizes_, in_layout_);
    StridedBuffer out(dtype_, out_sizes, out_layout_);
    std::mt19937_64 rng(seed_);
    std::normal_distribution<double> normal;
    const Values values = values_ ? values_ : Values([&](std::int64_t, std::mt19937_64& r) { return 3 * normal(r); });
    for_each_index(sizes_, [&](const Dims& index, std::int64_t flat) {
      store_float(dtype_, in.element(index), values(flat, rng));
    });

    LpPoolingDesc desc;
    desc.input = TensorDesc{dtype_, sizes_, std::nullopt};
    desc.window_size = window_;
    desc.strides = strides;
    desc.start_padding = start;
    desc.end_padding = end;
    if (!dilations_.empty()) desc.dilations = dilations_;
    desc.p = p_;
    const std::vector<std::byte> in_before = in.bytes();
    {
      ThreadCountGuard guard(threads_);
      EXPECT_NO_THROW(execute(desc, in.view(), out.view())) << describe();
    }
    EXPECT_TRUE(in.bytes() == in_before) << "the input was modified; " << describe();
    EXPECT_EQ(out.written_outside(), 0) << "bytes written outside the output elements; " << describe();

    std::vector<Real> got_all;
    std::int64_t mismatches = 0;
    const Real taps = static_cast<Real>(window_.product());
    for_each_index(out_sizes, [&](const Dims& o, std::int64_t) {
      // The window's taps inside the input, by explicit coordinates.
      std::vector<Real> taps_inside;
      for_each_index(window_, [&](const Dims& t, std::int64_t) {
        Dims i{o[0], o[1]};
        for (int a = 0; a < spatial; ++a) {
          const std::int64_t coordinate = o[a + 2] * strides[a] + t[a] * dilations[a] - start[a];
          if (coordinate < 0 || coordinate >= sizes_[a + 2]) return;  // padding: contributes 0
          i.push_back(coordinate);
        }
        taps_inside.push_back(float_at(dtype_, in.element(i)));
      });
      const Real want = lp_norm(taps_inside, static_cast<std::uint64_t>(p_));
      const Real got = float_at(dtype_, out.element(o));
      got_all.push_back(got);
      if (!close(got, want, taps) && ++mismatches <= 5)
        ADD_FAILURE() << describe() << "\n  output index " << o << ": expected " << static_cast<double>(want)
                      << " got " << static_cast<double>(got);
    });
    EXPECT_EQ(mismatches, 0) << "wrong outputs in total; " << describe();
    return got_all;
  }

 private:
  template <class Fn>
  static void for_each_index(const Dims& sizes, Fn fn) {
    const std::int64_t total = sizes.product();
    Dims index = Dims::filled(sizes.size(), 0);
    for (std::int64_t flat = 0; flat < total; ++flat) {
      fn(index, flat);
      for (int a = sizes.size() - 1; a >= 0; --a) {
        if (++index[a] < sizes[a]) break;
        index[a] = 0;
      }
    }
  }

  bool close(Real got, Real want, Real taps) const {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == kInf;
    if (want == 0) return got == 0;
    Real rel, subnormal;
    switch (dtype_) {
      case DataType::Float32:
        rel = (taps + 4) * std::ldexp(1.0L, -24);
        subnormal = std::numeric_limits<float>::denorm_min();
        break;
      case DataType::Float64:
        rel = (taps + 4) * std::ldexp(1.0L, -53);
        subnormal = std::numeric_limits<double>::denorm_min();
        break;
      default:
        rel = std::ldexp(1.0L, -10) + taps * std::ldexp(1.0L, -24);
        subnormal = std::ldexp(1.0L, -24);
        // Beyond the largest half the result rounds to inf (65520 is the rounding boundary).
        if (want >= 65520) return got == kInf;
        break;
    }
    return std::fabs(got - want) <= rel * want + 4 * subnormal;
  }

  std::string describe() const {
    std::ostringstream s;
    s << "dtype " << name(dtype_) << ", p " << p_ << ", sizes " << sizes_ << ", window " << window_ << ", strides "
      << strides_ << ", dilations " << dilations_ << ", start " << start_ << ", end " << end_;
    if (threads_) s << ", threads " << *threads_;
    s << ", seed " << seed_;
    return s.str();
  }

  Dims sizes_, window_, strides_, dilations_, start_, end_;
  std::int64_t p_ = 2;
  DataType dtype_ = DataType::Float32;
  Layout in_layout_, out_layout_;
  Values values_;
  std::optional<int> threads_;
  std::uint64_t seed_ = 0x5eed;
};

LpPoolingTester::Values constant(double v) {
  return [v](std::int64_t, std::mt19937_64&) { return v; };
}

// ---------------------------------------------------------------------------------------------
// Geometry

TEST(LpPooling, OneDimensionalGeometryExhaustively) {
  // Every small combination of size, window, stride, dilation and asymmetric padding on one
  // axis, including windows whose taps all fall in the padding (output 0).
  for (std::int64_t in = 1; in <= 7; ++in)
    for (std::int64_t window = 1; window <= 4; ++window)
      for (std::int64_t stride = 1; stride <= 3; ++stride)
        for (std::int64_t dilation = 1; dilation <= 3; ++dilation)
          for (std::int64_t start = 0; start <= 3; ++start)
            for (std::int64_t end = 0; end <= 2; ++end) {
              if (in + start + end < (window - 1) * dilation + 1) continue;
              const std::int64_t p = 1 + (in + window + stride + dilation + start + end) % 3;  // 1, 2, 3
              LpPoolingTester()
                  .sizes({1, 2, in})
                  .window({window})
                  .strides({stride})
                  .dilations({dilation})
                  .start({start})
                  .end({end})
                  .p(p)
                  .Test();
            }
}

TEST(LpPooling, TwoAndThreeDimensionalWindows) {
  for (DataType dtype : kFloatDtypes) {
    for (std::int64_t p : {1, 2, 3, 4, 7}) {
      LpPoolingTester().sizes({2, 3, 9, 11}).window({3, 3}).strides({2, 2}).start({1, 1}).end({1, 1}).p(p).dtype(
          dtype).Test();
      LpPoolingTester().sizes({1, 2, 8, 7}).window({2, 4}).strides({1, 3}).start({0, 2}).end({3, 0}).p(p).dtype(
          dtype).Test();
      LpPoolingTester().sizes({1, 2, 6, 7, 8}).window({2, 2, 2}).dilations({2, 2, 2}).p(p).dtype(dtype).Test();
      LpPoolingTester()
          .sizes({2, 1, 5, 6, 7})
          .window({3, 1, 2})
          .strides({2, 1, 3})
          .dilations({1, 3, 2})
          .start({2, 0, 1})
          .end({0, 1, 2})
          .p(p)
          .dtype(dtype)
          .Test();
    }
  }
}

TEST(LpPooling, WindowsEntirelyInThePaddingAreZero) {
  // start 3 with window 2: the first output row and column see only padding.
  for (std::int64_t p : {1, 2, 5}) {
    LpPoolingTester().sizes({1, 1, 4, 4}).window({2, 2}).strides({1, 1}).start({3, 3}).end({2, 2}).p(p).Test();
    LpPoolingTester().sizes({1, 1, 3, 4, 2}).window({1, 2, 1}).strides({2, 3, 1}).start({4, 2, 5}).end({4, 3, 1}).p(
        p).Test();
  }
}

TEST(LpPooling, LongRowsSplitIntoBlocks) {
  // Rows far longer than one block (stride 1 and 7, a wide dilated window), so outputs are
  // computed in several blocks per row.
  for (std::int64_t p : {1, 2, 3}) {
    LpPoolingTester().sizes({1, 1, 2, 9000}).window({2, 3}).start({0, 1}).end({1, 1}).p(p).Test();
    LpPoolingTester().sizes({1, 2, 20000}).window({5}).strides({7}).dilations({3}).start({4}).end({9}).p(p).Test();
    LpPoolingTester().sizes({1, 1, 6000}).window({3000}).strides({1000}).dilations({2}).start({10}).p(p).Test();
  }
}

TEST(LpPooling, WholeInputWindows) {
  // Global pooling: one output per channel.
  for (DataType dtype : kFloatDtypes) {
    LpPoolingTester().sizes({2, 3, 17, 19}).window({17, 19}).p(2).dtype(dtype).Test();
    LpPoolingTester().sizes({1, 2, 5, 6, 7}).window({5, 6, 7}).p(3).dtype(dtype).Test();
  }
}

// ---------------------------------------------------------------------------------------------
// Layouts

TEST(LpPooling, TransposedNegativeBroadcastAndSlicedInputs) {
  const std::vector<std::vector<int>> orders = {{0, 1, 2, 3}, {3, 2, 1, 0}, {0, 3, 1, 2}, {2, 0, 3, 1}};
  for (DataType dtype : kFloatDtypes) {
    for (const auto& order : orders) {
      for (std::uint32_t negate : {0u, 0b1000u, 0b0101u, 0b1111u}) {
        LpPoolingTester()
            .sizes({2, 3, 6, 7})
            .window({3, 2})
            .strides({2, 1})
            .start({1, 0})
            .end({1, 1})
            .p(2 + negate % 2)
            .dtype(dtype)
            .input_layout(Layout{}.order(order).negate(negate))
            .Test();
      }
    }
    for (std::uint32_t broadcast : {0b0001u, 0b0100u, 0b1000u, 0b1100u}) {
      LpPoolingTester().sizes({2, 2, 5, 6}).window({2, 3}).strides({1, 2}).p(3).dtype(dtype).input_layout(
          Layout{}.broadcast(broadcast)).Test();
    }
    LpPoolingTester().sizes({1, 2, 5, 9}).window({3, 3}).start({1, 1}).end({1, 1}).p(1).dtype(dtype).input_layout(
        Layout{}.steps({1, 2, 3, 2})).Test();
  }
}

TEST(LpPooling, MisalignedBuffers) {
  // Unit stride but not aligned to the element: rows cannot be read in place.
  for (DataType dtype : kFloatDtypes) {
    for (std::int64_t p : {1, 2, 3}) {
      LpPoolingTester()
          .sizes({1, 2, 7, 9})
          .window({3, 3})
          .strides({2, 2})
          .start({1, 1})
          .end({1, 1})
          .p(p)
          .dtype(dtype)
          .input_layout(Layout{}.misalign(1))
          .output_layout(Layout{}.misalign(3))
          .Test();
    }
  }
}

TEST(LpPooling, StridedAndReversedOutputs) {
  for (DataType dtype : kFloatDtypes) {
    for (std::uint32_t negate : {0u, 0b1000u, 0b0110u}) {
      LpPoolingTester()
          .sizes({2, 2, 7, 8})
          .window({2, 2})
          .strides({2, 2})
          .p(2)
          .dtype(dtype)
          .output_layout(Layout{}.steps({1, 2, 1, 3}).negate(negate))
          .Test();
      LpPoolingTester()
          .sizes({1, 3, 6, 6})
          .window({3, 3})
          .start({1, 1})
          .end({1, 1})
          .p(5)
          .dtype(dtype)
          .output_layout(Layout{}.order({3, 2, 1, 0}).negate(negate))
          .Test();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Values: signs, magnitudes, specials

TEST(LpPooling, NegativeInputsWithOddPGiveTheNorm) {
  // |x|^p, not x^p: an all-negative window has a positive norm for every p.
  for (DataType dtype : kFloatDtypes) {
    for (std::int64_t p : {1, 3, 5, 7}) {
      const auto results =
          LpPoolingTester().sizes({1, 1, 4, 4}).window({2, 2}).strides({2, 2}).p(p).dtype(dtype).values(constant(-2.0))
              .Test();
      const double norm = 2.0 * std::pow(4.0, 1.0 / static_cast<double>(p));
      for (Real y : results) EXPECT_NEAR(static_cast<double>(y), norm, 2e-3);
    }
  }
}

TEST(LpPooling, LargePDoesNotOverflow) {
  // 1e30^30 and 3e38^30 overflow every float type; the norms do not.
  for (std::int64_t p : {std::int64_t{30}, std::int64_t{101}, std::int64_t{1000}, kLpPoolingMaxP}) {
    LpPoolingTester().sizes({1, 2, 6, 6}).window({3, 3}).start({1, 1}).end({1, 1}).p(p).values(
        [](std::int64_t flat, std::mt19937_64& rng) {
          return (flat % 2 ? -1.0 : 1.0) * 3e38 * std::uniform_real_distribution<double>(0.01, 1.0)(rng);
        }).Test();
    LpPoolingTester().sizes({1, 2, 6, 6}).window({3, 3}).p(p).dtype(DataType::Float64).values(
        [](std::int64_t, std::mt19937_64& rng) { return 1e300 * std::normal_distribution<double>()(rng); }).Test();
    LpPoolingTester().sizes({1, 2, 6, 6}).window({2, 2}).p(p).dtype(DataType::Float16).values(
        [](std::int64_t, std::mt19937_64& rng) { return 6e4 * std::normal_distribution<double>()(rng); }).Test();
  }
}

TEST(LpPooling, RootsOfLargeAndSmallSumsAreAccurate) {
  // Regression: y = pow(S, 1/p) with 1/p rounded is ln(S) * ulp(1/p) off, some 100 ulps for
  // float64 sums near 1e300. One tap gives |x| back; the tester's bound is (1 + 4) ulps.
  for (std::int64_t p : {3, 5, 7, 31}) {
    for (DataType dtype : {DataType::Float32, DataType::Float64}) {
      const double top = dtype == DataType::Float32 ? 38.0 : 307.0;
      LpPoolingTester().sizes({1, 1, 2, 40}).window({1, 1}).p(p).dtype(dtype).values(
          [&](std::int64_t flat, std::mt19937_64&) {
            return (flat % 2 ? -1.0 : 1.0) * std::pow(10.0, top / static_cast<double>(p) * (flat % 40) / 40.0);
          }).Test();
    }
  }
}

TEST(LpPooling, Float32RootsOfOneTapAreWithinAnUlp) {
  // One tap: the norm is |x|. The sum |x|^p is rounded p - 1 times (under p/2 ulps), which the
  // root divides by p, and the root rounds once: within an ulp of |x|. Magnitudes sweep the fast
  // path's range and past both ends (repaired outputs); p <= 8 takes the vectorised Newton root,
  // p = 9 and 10 pow and one Newton step.
  for (std::int64_t p = 3; p <= 10; ++p) {
    const double lo = std::log2(std::numeric_limits<float>::min()) / static_cast<double>(p) - 4;
    const double hi = 128.0 / static_cast<double>(p);
    const std::int64_t n = 4099;
    std::vector<float> x(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      x[static_cast<std::size_t>(i)] = static_cast<float>((i % 2 ? -1.0 : 1.0) * std::exp2(lo + (hi - lo) * static_cast<double>(i) / n));
    LpPoolingDesc desc;
    desc.input = TensorDesc{DataType::Float32, {1, 1, n}, std::nullopt};
    desc.window_size = {1};
    desc.strides = {1};
    desc.start_padding = {0};
    desc.end_padding = {0};
    desc.p = p;
    execute(desc, TensorView{DataType::Float32, {1, 1, n}, {4 * n, 4 * n, 4}, x.data()},
            TensorView{DataType::Float32, {1, 1, n}, {4 * n, 4 * n, 4}, y.data()});
    for (std::int64_t i = 0; i < n; ++i) {
      const float want = std::fabs(x[static_cast<std::size_t>(i)]), got = y[static_cast<std::size_t>(i)];
      const float ulp = std::nextafter(want, std::numeric_limits<float>::infinity()) - want;
      ASSERT_LE(std::fabs(got - want), ulp) << "p " << p << ", |x| " << want << ", got " << got;
    }
  }
}

TEST(LpPooling, HugeAndTinyMagnitudesWithP2) {
  // Squares overflow (1e30^2 in float32, 1e300^2 in float64) or underflow into the subnormals
  // (1e-25^2, 1e-40 itself): the p = 2 path must recompute those outputs, scaled.
  for (double scale : {1e30, 1e-25, 1e-40, 1e-44}) {
    LpPoolingTester().sizes({1, 2, 7, 7}).window({3, 3}).strides({2, 2}).start({1, 1}).end({1, 1}).p(2).values(
        [scale](std::int64_t, std::mt19937_64& rng) { return scale * std::normal_distribution<double>()(rng); }).Test();
  }
  for (double scale : {1e300, 1e-170, 1e-310}) {
    LpPoolingTester().sizes({1, 2, 7, 7}).window({3, 3}).p(2).dtype(DataType::Float64).values(
        [scale](std::int64_t, std::mt19937_64& rng) { return scale * std::normal_distribution<double>()(rng); }).Test();
  }
  // float16 subnormals (6e-8) are exact in float32 squares.
  LpPoolingTester().sizes({1, 2, 7, 7}).window({3, 3}).p(2).dtype(DataType::Float16).values(
      [](std::int64_t, std::mt19937_64& rng) { return 1e-7 * std::normal_distribution<double>()(rng); }).Test();
  // A window mixing 1e30 and 1: the sum of squares is inf, the norm is 1e30 * sqrt(taps of it).
  LpPoolingTester().sizes({1, 1, 4, 4}).window({2, 2}).p(2).values(
      [](std::int64_t flat, std::mt19937_64&) { return flat % 3 ? 1.0 : 1e30; }).Test();
}

TEST(LpPooling, RepairsOneByOneAndBlockWise) {
  // Outputs whose fast-path sum of |x|^p is out of range are recomputed scaled: one by one when
  // a block has a few (one huge, NaN or inf element in a long row), for the whole block when it
  // has many (every element huge for this p).
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DataType dtype : kFloatDtypes) {
    const double huge = dtype == DataType::Float16 ? 6e4 : dtype == DataType::Float32 ? 3e30 : 1e300;
    for (std::int64_t p : {2, 3, 30}) {
      for (double special : {huge, inf, -inf, nan, 0.0}) {
        LpPoolingTester().sizes({1, 2, 5, 60}).window({3, 3}).strides({2, 2}).start({1, 1}).end({1, 1}).p(p).dtype(
            dtype).values([special](std::int64_t flat, std::mt19937_64& rng) {
              return flat == 137 ? special : std::normal_distribution<double>()(rng);
            }).Test();
      }
      LpPoolingTester().sizes({1, 2, 5, 60}).window({3, 3}).strides({2, 2}).start({1, 1}).end({1, 1}).p(p).dtype(
          dtype).values([huge](std::int64_t flat, std::mt19937_64& rng) {
            return (flat % 7 ? huge : 1.0) * std::normal_distribution<double>()(rng);
          }).Test();
    }
  }
}

TEST(LpPooling, Float16ResultsAboveTheLargestHalfAreInf) {
  LpPoolingTester().sizes({1, 1, 4, 4}).window({4, 4}).p(1).dtype(DataType::Float16).values(constant(60000.0)).Test();
  LpPoolingTester().sizes({1, 1, 4, 4}).window({4, 4}).p(2).dtype(DataType::Float16).values(constant(-60000.0)).Test();
}

TEST(LpPooling, NanPropagatesAndInfGivesInf) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  // Patterns over a 4x4 input pooled 2x2 with stride 1: windows with NaN, inf, -inf, both, zeros.
  const std::vector<std::vector<double>> patterns = {
      {nan, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
      {1, 2, 3, 4, 5, -inf, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
      {0, 0, 0, 0, 0, inf, nan, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, nan},
      {nan, nan, nan, nan, 1, 1, 1, 1, inf, inf, inf, inf, 0, 0, 0, 0},
  };
  for (DataType dtype : kFloatDtypes) {
    for (std::int64_t p : {1, 2, 3, 30}) {
      for (const auto& pattern : patterns) {
        LpPoolingTester().sizes({1, 1, 4, 4}).window({2, 2}).start({1, 0}).p(p).dtype(dtype).values(
            [&pattern](std::int64_t flat, std::mt19937_64&) { return pattern[static_cast<std::size_t>(flat)]; }).Test();
      }
    }
  }
}

TEST(LpPooling, ZerosAndSignedZeros) {
  for (std::int64_t p : {1, 2, 3}) {
    const auto results = LpPoolingTester().sizes({1, 1, 3, 3}).window({2, 2}).p(p).values(
        [](std::int64_t flat, std::mt19937_64&) { return flat % 2 ? -0.0 : 0.0; }).Test();
    for (Real y : results) EXPECT_FALSE(std::signbit(y)) << "a norm is never -0";
  }
}

TEST(LpPooling, AccuracyOfThreeByThreeWindows) {
  // float32 accumulating in float32, measured in ulps of the float32-rounded reference over
  // 60,000 random 3x3 windows: the bound the tester uses is (9 + 4) / 2 = 6.5 ulps at worst;
  // the real error stays within a few.
  for (std::int64_t p : {1, 2, 3, 4, 5, 8}) {
    LpPoolingDesc desc;
    desc.input = TensorDesc{DataType::Float32, {1, 6, 100, 100}, std::nullopt};
    desc.window_size = {3, 3};
    desc.strides = {1, 1};
    desc.start_padding = {0, 0};
    desc.end_padding = {0, 0};
    desc.p = p;
    std::vector<float> x(6 * 100 * 100), y(6 * 98 * 98);
    std::mt19937_64 rng(static_cast<std::uint64_t>(p));
    std::lognormal_distribution<float> magnitude(0.0f, 2.0f);
    for (float& v : x) v = (rng() & 1 ? -1.0f : 1.0f) * magnitude(rng);
    execute(desc, TensorView{DataType::Float32, {1, 6, 100, 100}, {240000, 40000, 400, 4}, x.data()},
            TensorView{DataType::Float32, {1, 6, 98, 98}, {230496, 38416, 392, 4}, y.data()});
    double worst = 0;
    for (int c = 0; c < 6; ++c)
      for (int i = 0; i < 98; ++i)
        for (int j = 0; j < 98; ++j) {
          std::vector<Real> taps;
          for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) taps.push_back(x[static_cast<std::size_t>(c * 10000 + (i + a) * 100 + j + b)]);
          const float want = static_cast<float>(lp_norm(taps, static_cast<std::uint64_t>(p)));
          const float got = y[static_cast<std::size_t>(c * 9604 + i * 98 + j)];
          const float ulp = std::nextafter(want, std::numeric_limits<float>::infinity()) - want;
          worst = std::max(worst, std::fabs(static_cast<double>(got) - want) / ulp);
        }
    EXPECT_LE(worst, 4.0) << "p " << p;
    ::testing::Test::RecordProperty("max_ulp_error_p" + std::to_string(p), std::to_string(worst));
  }
}

// ---------------------------------------------------------------------------------------------
// Threads

TEST(LpPooling, ThreadCountsGiveIdenticalBits) {
  for (std::int64_t p : {1, 2, 3}) {
    const auto make = [p] {
      return LpPoolingTester().sizes({2, 5, 21, 23}).window({3, 2}).strides({2, 1}).start({1, 0}).end({1, 1}).p(p);
    };
    const std::vector<Real> one = make().threads(1).Test();
    for (int threads : {2, 3, 5}) EXPECT_EQ(make().threads(threads).Test(), one) << "threads " << threads;
  }
  // One long 1-D row: the work is split by blocks of the row.
  const auto make = [] { return LpPoolingTester().sizes({1, 1, 30000}).window({4}).strides({3}).p(2); };
  EXPECT_EQ(make().threads(3).Test(), make().threads(1).Test());
}

// ---------------------------------------------------------------------------------------------
// Validation

LpPoolingDesc valid_desc() {
  LpPoolingDesc d;
  d.input = TensorDesc{DataType::Float32, {1, 2, 5, 6}, std::nullopt};
  d.window_size = {3, 3};
  d.strides = {2, 2};
  d.start_padding = {1, 1};
  d.end_padding = {1, 1};
  d.dilations = Dims{1, 1};
  d.p = 2;
  return d;
}

void expect_error(const LpPoolingDesc& d, const std::string& fragment, bool dtype_error = false) {
  const std::string message = dtype_error ? message_of<DTypeError>([&] { infer_output(d); })
                                          : message_of<InvalidArgument>([&] { infer_output(d); });
  EXPECT_NE(message.find(fragment), std::string::npos) << message << "\n  expected: " << fragment;
}

TEST(LpPoolingValidation, OutputSizes) {
  EXPECT_EQ(infer_output(valid_desc()).sizes, (Dims{1, 2, 3, 3}));
  LpPoolingDesc d = valid_desc();
  d.dilations = Dims{2, 1};  // extent 5 on H: (5 + 2 - 5) / 2 + 1 = 2
  EXPECT_EQ(infer_output(d).sizes, (Dims{1, 2, 2, 3}));
  d.dilations.reset();  // LpPooling (v1): dilations 1
  EXPECT_EQ(infer_output(d).sizes, (Dims{1, 2, 3, 3}));
}

TEST(LpPoolingValidation, EveryRuleHasItsMessage) {
  LpPoolingDesc d = valid_desc();
  d.input.sizes = {2, 5, 6};
  expect_error(d, "LpPooling1: strides has 2 entries but the input has 1 spatial dimensions");
  d = valid_desc();
  d.input.sizes = {5, 6};
  expect_error(d, "LpPooling1: input has 2 dimensions; it must be 4-D");
  d.input.sizes = {1, 1, 1, 1, 1, 1};
  expect_error(d, "input has 6 dimensions");
  d = valid_desc();
  d.input.dtype = DataType::Int32;
  expect_error(d, "LpPooling1: input has dtype int32; supported: float32, float16 and float64", true);
  for (auto field : {&LpPoolingDesc::strides, &LpPoolingDesc::window_size, &LpPoolingDesc::start_padding,
                     &LpPoolingDesc::end_padding}) {
    d = valid_desc();
    (d.*field).push_back(1);
    expect_error(d, "has 3 entries but the input has 2 spatial dimensions");
    d = valid_desc();
    d.*field = Dims{};
    expect_error(d, "has 0 entries");
  }
  d = valid_desc();
  d.dilations = Dims{1};
  expect_error(d, "LpPooling1: dilations has 1 entries");
  d = valid_desc();
  d.p = 0;
  expect_error(d, "LpPooling1: p is 0; it must be >= 1");
  d.p = -3;
  expect_error(d, "p is -3");
  d.p = kLpPoolingMaxP + 1;
  expect_error(d, "p is 4294967296; P is a UINT, at most 4294967295");
  d = valid_desc();
  d.window_size = {3, 0};
  expect_error(d, "window_size[1] is 0; it must be >= 1");
  d = valid_desc();
  d.strides = {0, 1};
  expect_error(d, "strides[0] is 0; it must be >= 1");
  d = valid_desc();
  d.dilations = Dims{1, 0};
  expect_error(d, "dilations[1] is 0; it must be >= 1");
  d = valid_desc();
  d.start_padding = {-1, 0};
  expect_error(d, "start_padding[0] is -1; it must be >= 0");
  d = valid_desc();
  d.window_size = {8, 3};
  expect_error(d, "on spatial dimension 0 the window extent 8 (window_size 8, dilation 1) is larger than the padded "
                  "input 7");
  d = valid_desc();
  d.dilations = Dims{1, 4};
  expect_error(d, "window extent 9 (window_size 3, dilation 4) is larger than the padded input 8");
  d = valid_desc();  // each factor allowed, (window - 1) * dilation + 1 past int64
  d.window_size = {(std::int64_t{1} << 24) + 1, 3};
  d.dilations = Dims{std::int64_t{1} << 40, 1};
  expect_error(d, "LpPooling1: on spatial dimension 0 the window extent (window_size - 1) * dilation + 1 is beyond 2^62");
  d = valid_desc();
  d.op_name = "LpPooling";
  d.output = TensorDesc{DataType::Float32, {1, 2, 3, 4}, std::nullopt};
  expect_error(d, "LpPooling: output has sizes (1, 2, 3, 4) but the window geometry gives (1, 2, 3, 3)");
  d.output = TensorDesc{DataType::Float16, {1, 2, 3, 3}, std::nullopt};
  expect_error(d, "LpPooling: output has dtype float16 but the input is float32", true);
}

TEST(LpPoolingValidation, ExecuteChecksViewsBeforeWriting) {
  const LpPoolingDesc d = valid_desc();
  std::vector<float> x(60, 1.0f), y(18, -7.0f);
  const TensorView in{DataType::Float32, {1, 2, 5, 6}, {240, 120, 24, 4}, x.data()};
  TensorView out{DataType::Float32, {1, 2, 3, 3}, {72, 36, 12, 4}, y.data()};
  TensorView wrong = out;
  wrong.sizes = {1, 2, 3, 2};
  EXPECT_THROW(execute(d, in, wrong), InvalidArgument);
  TensorView overlapping{DataType::Float32, {1, 2, 3, 3}, {72, 36, 12, 4}, x.data()};
  EXPECT_THROW(execute(d, in, overlapping), InvalidArgument);
  TensorView self_overlapping = out;
  self_overlapping.byte_strides = {72, 0, 12, 4};
  EXPECT_THROW(execute(d, in, self_overlapping), InvalidArgument);
  TensorView half_out = out;
  half_out.dtype = DataType::Float16;
  EXPECT_THROW(execute(d, in, half_out), DTypeError);
  for (float v : y) EXPECT_EQ(v, -7.0f) << "a rejected call wrote into the output";
  execute(d, in, out);
  EXPECT_FLOAT_EQ(y[4], 3.0f);  // a full 3x3 window of ones: sqrt(9)
}

// The plan: the norm's path by p, and the blocking of the output rows.
TEST(LpPoolingPlan, ThePathFollowsP) {
  ThreadCountGuard guard(2);
  LpPoolingDesc d = valid_desc();  // 1x2x5x6, window 3x3, stride 2, padding 1
  d.p = 1;
  EXPECT_EQ(plan(d).algorithm, "sum_abs");
  d.p = 2;
  KernelPlan p = plan(d);
  EXPECT_EQ(p.algorithm, "sum_squares");
  EXPECT_EQ(p.threads, 2);
  const std::map<std::string, std::int64_t> tiles = testing::tiles_of(p);
  EXPECT_EQ(tiles.at("rows"), 2 * 3);  // N * C * output height
  EXPECT_EQ(tiles.at("blocks"), 1);
  EXPECT_EQ(tiles.at("block"), 3);
  EXPECT_EQ(tiles.at("span"), 6);
  EXPECT_EQ(p.tasks, 6);
  EXPECT_NE(p.reason.find("the 3 taps of stride 2 along W are compiled in"), std::string::npos) << p.reason;
  d.p = 7;
  EXPECT_EQ(plan(d).algorithm, "sum_powers");
  d.strides = {1, 4};
  EXPECT_NE(plan(d).reason.find("the taps along W one at a time"), std::string::npos);
  d.p = 0;
  EXPECT_EQ(message_of<InvalidArgument>([&] { plan(d); }), message_of<InvalidArgument>([&] { infer_output(d); }));
}

}  // namespace
}  // namespace dmlops
