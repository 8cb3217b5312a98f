// Upsample2D and Resample (docs/semantics/resample.md).
//
// ResampleTester builds one case (sizes, per-axis scales and offsets, mode, rounding, dtype,
// memory layouts, thread count), runs dmlops::execute and checks every output element against
// a naive reference written here from the spec's formulas: for nearest the source element bit
// for bit, for linear a dense sum over all 2^rank corner combinations (or, antialiased, over
// every input pixel of the axis) in double, within a rounding bound. The TESTs only enumerate
// cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
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
#include "dmlops/ops/resample.hpp"
#include "test_support.hpp"

namespace dmlops {
namespace {

using testing::float_at;
using testing::message_of;
using testing::splitmix64;
using testing::store_float;
using testing::ThreadCountGuard;

constexpr std::byte kSentinel{0xa5};


// The spec's per-axis rule, written out directly.
struct AxisRule {
  std::int64_t in, out;
  double scale, input_offset, output_offset;

  double x(std::int64_t o) const { return (static_cast<double>(o) - output_offset) / scale - input_offset; }
  std::int64_t clamp(double i) const { return static_cast<std::int64_t>(std::min(std::max(i, 0.0), double(in - 1))); }

  // nearest: rounding 0 = RESAMPLE1 floor(x + 0.5), 1 = DECREASING floor(x), 2 = INCREASING ceil(x)
  std::int64_t nearest(std::int64_t o, int rounding) const {
    const double v = x(o);
    return clamp(rounding == 0 ? std::floor(v + 0.5) : rounding == 1 ? std::floor(v) : std::ceil(v));
  }
  // The weight of input pixel i in output o (linear, or the antialiased triangle).
  double weight(std::int64_t o, std::int64_t i, bool antialiased) const {
    const double v = x(o);
    if (antialiased && scale < 1.0) {
      // Sum of the normalised triangle over every integer tap that clamps onto pixel i.
      double total = 0.0, mine = 0.0;
      for (double t = std::floor(v - 1.0 / scale) - 1; t <= std::ceil(v + 1.0 / scale) + 1; t += 1.0) {
        const double w = std::max(0.0, 1.0 - std::fabs(t - v) * scale);
        total += w;
        if (clamp(t) == i) mine += w;
      }
      return mine / total;
    }
    const double c = std::min(std::max(v, 0.0), double(in - 1));
    const double i0 = std::floor(c), w = c - i0;
    const auto i1 = std::min<std::int64_t>(static_cast<std::int64_t>(i0) + 1, in - 1);
    return (i == static_cast<std::int64_t>(i0) ? 1.0 - w : 0.0) + (i == i1 ? w : 0.0);
  }
};

class ResampleTester {
 public:
  ResampleTester& sizes(Dims v) { sizes_ = v; return *this; }
  // Per axis; empty offsets are the defaults 0.5 / -0.5.
  ResampleTester& scales(std::vector<float> v) { scales_ = std::move(v); return *this; }
  ResampleTester& offsets(std::vector<float> in, std::vector<float> out) {
    in_offsets_ = std::move(in);
    out_offsets_ = std::move(out);
    return *this;
  }
  ResampleTester& output_sizes(Dims v) { out_sizes_ = v; return *this; }
  ResampleTester& mode(InterpolationMode m) { mode_ = m; return *this; }
  ResampleTester& rounding(std::optional<AxisDirection> r) { rounding_ = r; return *this; }
  ResampleTester& antialiased(bool a) { antialiased_ = a; return *this; }
  ResampleTester& dtype(DataType d) { dtype_ = d; return *this; }
  // Upsample2D instead of Resample: scales {1, .., sh, sw}, sizes of rank 4 or 5.
  ResampleTester& upsample_2d(std::int64_t sh, std::int64_t sw) { upsample_ = {sh, sw}; return *this; }
  // Input memory: axes in this order, outermost first; negated axes (bit mask); a broadcast axis.
  ResampleTester& input_order(std::vector<int> order) { in_order_ = std::move(order); return *this; }
  ResampleTester& input_negate(std::uint32_t axes) { in_negate_ = axes; return *this; }
  ResampleTester& input_broadcast(std::uint32_t axes) { in_broadcast_ = axes; return *this; }
  // Output written into every other element of a bigger buffer, axes in this order.
  ResampleTester& output_gaps() { out_step_ = 2; return *this; }
  ResampleTester& output_order(std::vector<int> order) { out_order_ = std::move(order); return *this; }
  ResampleTester& threads(int n) { threads_ = n; return *this; }

  void Test() const {
    const int rank = sizes_.size();
    const auto elem = static_cast<std::int64_t>(element_size(dtype_));

    // The per-axis rules and the descriptor.
    std::vector<AxisRule> rules;
    ResampleDesc desc;
    Upsample2DDesc up;
    if (upsample_) {
      up.input = {dtype_, sizes_, std::nullopt};
      up.scale_height = upsample_->first;
      up.scale_width = upsample_->second;
      up.mode = mode_;
      for (int a = 0; a < rank; ++a) {
        const double s = a == rank - 2 ? double(upsample_->first) : a == rank - 1 ? double(upsample_->second) : 1.0;
        rules.push_back({sizes_[a], sizes_[a] * static_cast<std::int64_t>(s), s, 0.5, -0.5});
      }
    } else {
      desc.input = {dtype_, sizes_, std::nullopt};
      desc.mode = mode_;
      desc.rounding_direction = rounding_;
      desc.scales = scales_;
      desc.input_pixel_offsets = in_offsets_;
      desc.output_pixel_offsets = out_offsets_;
      desc.antialiased = antialiased_;
      if (!out_sizes_.empty()) desc.output = TensorDesc{dtype_, out_sizes_, std::nullopt};
      const TensorDesc inferred = infer_output(desc);
      for (int a = 0; a < rank; ++a) {
        const auto i = static_cast<std::size_t>(a);
        rules.push_back({sizes_[a], inferred.sizes[a], scales_[i], in_offsets_.empty() ? 0.5 : in_offsets_[i],
                         out_offsets_.empty() ? -0.5 : out_offsets_[i]});
      }
    }
    Dims out_sizes;
    for (const AxisRule& r : rules) out_sizes.push_back(r.out);

    // Memory: input in in_order_ (broadcast axes stride 0, negated axes backwards), output
    // in out_order_ with gaps.
    const auto layout = [&](const Dims& sizes, const std::vector<int>& order_given, std::int64_t step,
                            std::uint32_t negate, std::uint32_t broadcast, std::int64_t& origin) {
      std::vector<int> order = order_given;
      if (order.empty()) {
        order.resize(static_cast<std::size_t>(rank));
        std::iota(order.begin(), order.end(), 0);
      }
      Dims strides = Dims::filled(rank, 0);
      std::int64_t extent = 1;
      for (int k = rank - 1; k >= 0; --k) {
        const int a = order[static_cast<std::size_t>(k)];
        if ((broadcast >> a) & 1u) continue;
        strides[a] = step * extent;
        extent *= sizes[a] * step;
      }
      origin = 0;
      for (int a = 0; a < rank; ++a) {
        if ((negate >> a) & 1u) {
          origin += (sizes[a] - 1) * strides[a];
          strides[a] = -strides[a];
        }
      }
      return std::pair{strides, extent};
    };
    std::int64_t in_origin = 0, out_origin = 0;
    const auto [in_strides, in_extent] = layout(sizes_, in_order_, 1, in_negate_, in_broadcast_, in_origin);
    const auto [out_strides, out_extent] = layout(out_sizes, out_order_, out_step_, 0, 0, out_origin);

    std::uint64_t rng = 0x5eed + static_cast<std::uint64_t>(rank);
    std::vector<std::byte> in_buf(static_cast<std::size_t>(in_extent * elem));
    for (std::int64_t k = 0; k < in_extent; ++k) {
      const std::uint64_t bits = splitmix64(rng);
      if (is_floating(dtype_)) {  // finite values in [-4, 4)
        store_float(dtype_, in_buf.data() + k * elem, static_cast<double>(bits >> 11) * 0x1p-53 * 8.0 - 4.0);
      } else {
        std::memcpy(in_buf.data() + k * elem, &bits, static_cast<std::size_t>(elem));
      }
    }
    std::vector<std::byte> out_buf(static_cast<std::size_t>(out_extent * elem), kSentinel);
    std::byte* in_base = in_buf.data() + in_origin * elem;
    std::byte* out_base = out_buf.data() + out_origin * elem;
    Dims in_bytes = in_strides, out_bytes = out_strides;
    for (std::int64_t& s : in_bytes) s *= elem;
    for (std::int64_t& s : out_bytes) s *= elem;
    const TensorView in_view{dtype_, sizes_, in_bytes, in_base};
    const TensorView out_view{dtype_, out_sizes, out_bytes, out_base};
    {
      ThreadCountGuard guard(threads_);
      if (upsample_) ASSERT_NO_THROW(execute(up, in_view, out_view)) << describe();
      else ASSERT_NO_THROW(execute(desc, in_view, out_view)) << describe();
    }

    // Reference, element by element. Linear: the taps (input index, weight != 0) of every
    // output index of every axis, from the rule's weight of each input pixel.
    std::vector<std::vector<std::vector<std::pair<std::int64_t, double>>>> axis_taps(static_cast<std::size_t>(rank));
    for (int a = 0; mode_ == InterpolationMode::Linear && a < rank; ++a) {
      const AxisRule& r = rules[static_cast<std::size_t>(a)];
      for (std::int64_t o = 0; o < r.out; ++o) {
        auto& taps = axis_taps[static_cast<std::size_t>(a)].emplace_back();
        for (std::int64_t i = 0; i < r.in; ++i) {
          const double w = r.weight(o, i, antialiased_);
          if (w != 0.0) taps.push_back({i, w});
        }
      }
    }
    const int rounding = !rounding_ ? 0 : *rounding_ == AxisDirection::Decreasing ? 1 : 2;
    const double eps = dtype_ == DataType::Float64 ? 0x1p-52 : 0x1p-23;
    std::vector<bool> written(out_buf.size(), false);
    std::int64_t mismatches = 0;
    Dims index = Dims::filled(rank, 0);
    for (std::int64_t flat = 0; flat < out_sizes.product(); ++flat) {
      std::int64_t out_offset = 0;
      for (int a = 0; a < rank; ++a) out_offset += index[a] * out_bytes[a];
      const std::byte* got = out_base + out_offset;
      for (std::int64_t b = 0; b < elem; ++b) written[static_cast<std::size_t>(got - out_buf.data() + b)] = true;
      std::string failure;
      if (mode_ == InterpolationMode::NearestNeighbor) {
        std::int64_t in_offset = 0;
        for (int a = 0; a < rank; ++a) in_offset += rules[static_cast<std::size_t>(a)].nearest(index[a], rounding) * in_bytes[a];
        if (std::memcmp(got, in_base + in_offset, static_cast<std::size_t>(elem)) != 0) failure = "different bits";
      } else {
        // Dense sum over every combination of input indices with nonzero weight.
        std::vector<const std::vector<std::pair<std::int64_t, double>>*> taps;
        for (int a = 0; a < rank; ++a)
          taps.push_back(&axis_taps[static_cast<std::size_t>(a)][static_cast<std::size_t>(index[a])]);
        double sum = 0.0, magnitude = 0.0;
        Dims t = Dims::filled(rank, 0);
        for (;;) {
          double w = 1.0;
          std::int64_t in_offset = 0;
          for (int a = 0; a < rank; ++a) {
            const auto& [i, wi] = (*taps[static_cast<std::size_t>(a)])[static_cast<std::size_t>(t[a])];
            w *= wi;
            in_offset += i * in_bytes[a];
          }
          const double v = float_at(dtype_, in_base + in_offset);
          sum += w * v;
          magnitude += std::fabs(w * v);
          int a = rank - 1;
          for (; a >= 0 && ++t[a] == static_cast<std::int64_t>(taps[static_cast<std::size_t>(a)]->size()); --a) t[a] = 0;
          if (a < 0) break;
        }
        double tolerance = 4.0 * (rank + 1) * eps * magnitude * (antialiased_ ? 8.0 : 1.0);
        if (dtype_ == DataType::Float16) tolerance += std::fabs(sum) * 0x1p-11 + 0x1p-24;
        const double value = float_at(dtype_, got);
        if (!(std::fabs(value - sum) <= tolerance)) {
          std::ostringstream s;
          s << "expected " << sum << " got " << value << " (tolerance " << tolerance << ")";
          failure = s.str();
        }
      }
      if (!failure.empty() && ++mismatches <= 5) ADD_FAILURE() << describe() << "\n  output " << index << ": " << failure;
      for (int a = rank - 1; a >= 0; --a) {
        if (++index[a] < out_sizes[a]) break;
        index[a] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0) << "wrong elements in total; " << describe();
    std::int64_t stray = 0;
    for (std::size_t i = 0; i < out_buf.size(); ++i) stray += !written[i] && out_buf[i] != kSentinel;
    EXPECT_EQ(stray, 0) << "bytes written outside the output elements; " << describe();
  }

 private:
  std::string describe() const {
    std::ostringstream s;
    s << (upsample_ ? "Upsample2D" : "Resample") << " " << name(mode_) << ", " << name(dtype_) << ", sizes " << sizes_;
    if (upsample_) s << ", scale " << upsample_->first << "x" << upsample_->second;
    else {
      s << ", scales {";
      for (float v : scales_) s << v << ' ';
      s << "}";
      if (!in_offsets_.empty()) {
        s << ", offsets {";
        for (std::size_t i = 0; i < in_offsets_.size(); ++i) s << in_offsets_[i] << '/' << out_offsets_[i] << ' ';
        s << "}";
      }
      if (rounding_) s << ", rounding " << name(*rounding_);
      if (antialiased_) s << ", antialiased";
      if (!out_sizes_.empty()) s << ", output " << out_sizes_;
    }
    if (in_negate_ || in_broadcast_) s << ", input negate " << in_negate_ << " broadcast " << in_broadcast_;
    if (!in_order_.empty()) s << ", input transposed";
    if (out_step_ > 1) s << ", output with gaps";
    if (threads_) s << ", threads " << *threads_;
    return s.str();
  }

  Dims sizes_, out_sizes_;
  std::vector<float> scales_, in_offsets_, out_offsets_;
  InterpolationMode mode_ = InterpolationMode::NearestNeighbor;
  std::optional<AxisDirection> rounding_;
  bool antialiased_ = false;
  DataType dtype_ = DataType::Float32;
  std::optional<std::pair<std::int64_t, std::int64_t>> upsample_;
  std::vector<int> in_order_, out_order_;
  std::uint32_t in_negate_ = 0, in_broadcast_ = 0;
  std::int64_t out_step_ = 1;
  std::optional<int> threads_;
};

constexpr DataType kWidthDtypes[] = {DataType::Int8, DataType::UInt8, DataType::Float16, DataType::Int16,
                                     DataType::Float32, DataType::UInt32, DataType::Float64, DataType::Int64};
constexpr DataType kFloatDtypes[] = {DataType::Float32, DataType::Float16, DataType::Float64};
constexpr InterpolationMode kModes[] = {InterpolationMode::NearestNeighbor, InterpolationMode::Linear};

// ---------------------------------------------------------------------------------------------
// The spec's DxDispatch check, exactly.

TEST(Upsample2D, DxDispatchTable) {
  const std::vector<float> src = {1, 2, 3, 4};
  std::vector<float> dst(16, 0.0f);
  Upsample2DDesc desc;
  desc.input = {DataType::Float32, {1, 1, 2, 2}, std::nullopt};
  desc.scale_height = desc.scale_width = 2;
  desc.mode = InterpolationMode::Linear;
  execute(desc, TensorView{DataType::Float32, {1, 1, 2, 2}, {16, 16, 8, 4}, const_cast<float*>(src.data())},
          TensorView{DataType::Float32, {1, 1, 4, 4}, {64, 64, 16, 4}, dst.data()});
  EXPECT_EQ(dst, (std::vector<float>{1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f,
                                     3.75f, 4}));
}

// ---------------------------------------------------------------------------------------------
// Upsample2D: every element width for nearest, float types for linear, rank 4 and 5.

TEST(Upsample2D, NearestEveryWidthAndScale) {
  for (DataType dtype : kWidthDtypes) {
    for (const auto& [sh, sw] : {std::pair{1, 1}, {2, 2}, {3, 1}, {1, 4}, {5, 3}, {9, 2}}) {
      ResampleTester().sizes({2, 3, 4, 5}).upsample_2d(sh, sw).dtype(dtype).Test();
      ResampleTester().sizes({1, 2, 3, 4, 5}).upsample_2d(sh, sw).dtype(dtype).Test();
    }
  }
}

TEST(Upsample2D, LinearFloatTypes) {
  for (DataType dtype : kFloatDtypes) {
    for (const auto& [sh, sw] : {std::pair{1, 1}, {2, 2}, {3, 2}, {1, 5}, {4, 1}}) {
      ResampleTester().sizes({2, 3, 4, 5}).upsample_2d(sh, sw).mode(InterpolationMode::Linear).dtype(dtype).Test();
      ResampleTester().sizes({1, 2, 3, 4, 5}).upsample_2d(sh, sw).mode(InterpolationMode::Linear).dtype(dtype).Test();
    }
  }
}

TEST(Upsample2D, LargeEnoughToTileAndThread) {
  for (InterpolationMode mode : kModes) {
    for (int threads : {1, 2, 3}) {
      ResampleTester().sizes({2, 5, 70, 90}).upsample_2d(2, 3).mode(mode).threads(threads).Test();
      ResampleTester().sizes({1, 3, 4, 40, 33}).upsample_2d(3, 2).mode(mode).threads(threads).Test();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Resample: ranks 1-8, scales up and down, offsets, both rounding rules, antialiasing.

std::vector<float> first_floats(int rank, std::initializer_list<float> values) {
  return std::vector<float>(values.begin(), values.begin() + rank);
}
Dims first_dims(int rank, std::initializer_list<std::int64_t> values) {
  Dims d;
  for (std::int64_t v : values) {
    if (d.size() == rank) break;
    d.push_back(v);
  }
  return d;
}

TEST(Resample, NearestEveryRankRoundingAndOffsets) {
  const std::optional<AxisDirection> roundings[] = {std::nullopt, AxisDirection::Decreasing, AxisDirection::Increasing};
  for (int rank = 1; rank <= kMaxRank; ++rank) {
    for (const auto& rounding : roundings) {
      for (DataType dtype : {DataType::UInt8, DataType::Float16, DataType::Int32, DataType::Float64}) {
        const Dims sizes = first_dims(rank, {5, 3, 2, 3, 2, 1, 2, 2});
        const auto scales = first_floats(rank, {1.75f, 0.5f, 3.0f, 1.0f, 2.5f, 4.0f, 0.75f, 1.0f});
        ResampleTester().sizes(sizes).scales(scales).rounding(rounding).dtype(dtype).Test();
        ResampleTester()
            .sizes(sizes)
            .scales(scales)
            .offsets(first_floats(rank, {0.0f, 0.25f, -1.0f, 0.5f, 1.5f, 0.0f, 0.5f, 2.0f}),
                     first_floats(rank, {0.0f, 0.5f, 2.0f, -0.5f, 0.0f, 0.0f, -0.5f, 1.0f}))
            .rounding(rounding)
            .dtype(dtype)
            .Test();
      }
    }
  }
}

// Rows long enough for the AVX2 window kernel (4- and 8-byte elements): blocks whose sources
// lie in one 32-byte window and blocks that do not (downsampling), and gather runs entered
// part-way, off their blocks, when a row cut into column blocks for the threads starts with a
// broadcast of its first element (the output offset): the elements before the first block.
TEST(Resample, NearestWindowsOfLongRows) {
  for (DataType dtype : {DataType::Float32, DataType::Int32, DataType::Float64, DataType::Int64}) {
    for (float scale : {1.75f, 0.6f, 2.5f, 1.0001f, 3.3f}) {
      for (int threads : {1, 2, 3, 8}) {
        for (const Dims& sizes : {Dims{1, 1, 1, 40003}, Dims{1, 2, 3, 1000}}) {
          ResampleTester().sizes(sizes).scales({1, 1, 1, scale}).dtype(dtype).threads(threads).Test();
          ResampleTester()
              .sizes(sizes)
              .scales({1, 1, 1, scale})
              .offsets({0, 0, 0, 0.25f}, {0, 0, 0, 20.5f})
              .dtype(dtype)
              .threads(threads)
              .Test();
        }
      }
    }
  }
}

TEST(Resample, LinearEveryRank) {
  for (int rank = 1; rank <= 6; ++rank) {
    for (DataType dtype : kFloatDtypes) {
      const Dims sizes = first_dims(rank, {6, 3, 2, 3, 2, 2});
      const auto scales = first_floats(rank, {1.75f, 0.5f, 3.0f, 1.0f, 0.6f, 2.0f});
      ResampleTester().sizes(sizes).scales(scales).mode(InterpolationMode::Linear).dtype(dtype).Test();
      ResampleTester()
          .sizes(sizes)
          .scales(scales)
          .offsets(first_floats(rank, {0.0f, 0.25f, -1.0f, 0.5f, 1.5f, 0.0f}),
                   first_floats(rank, {0.0f, 0.5f, 2.0f, -0.5f, 0.0f, 0.0f}))
          .mode(InterpolationMode::Linear)
          .dtype(dtype)
          .Test();
    }
  }
}

TEST(Resample, AntialiasedDownsampling) {
  for (DataType dtype : kFloatDtypes) {
    for (const auto& scales : {std::vector<float>{0.5f, 0.5f}, {0.3f, 1.0f}, {0.25f, 0.7f}, {1.5f, 0.2f}}) {
      ResampleTester().sizes({11, 13}).scales(scales).mode(InterpolationMode::Linear).antialiased(true).dtype(dtype).Test();
      ResampleTester()
          .sizes({2, 11, 13})
          .scales({1.0f, scales[0], scales[1]})
          .offsets({0.5f, 0.0f, 1.0f}, {-0.5f, 0.0f, 0.25f})
          .mode(InterpolationMode::Linear)
          .antialiased(true)
          .dtype(dtype)
          .Test();
    }
  }
}

TEST(Resample, ExplicitOutputSizesCropAndClamp) {
  for (InterpolationMode mode : kModes) {
    ResampleTester().sizes({4, 6}).scales({2.0f, 0.5f}).output_sizes({5, 7}).mode(mode).Test();
    ResampleTester().sizes({4, 6}).scales({2.0f, 0.5f}).output_sizes({13, 1}).mode(mode).Test();
    ResampleTester().sizes({1, 6}).scales({3.0f, 0.1f}).output_sizes({1, 4}).mode(mode).antialiased(true).Test();
  }
}

// ---------------------------------------------------------------------------------------------
// Memory layouts: transposed, reversed and broadcast inputs; outputs with gaps and transposed.

TEST(Resample, StridedInputsAndOutputs) {
  const std::vector<std::vector<int>> orders = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {2, 1, 0}};
  for (InterpolationMode mode : kModes) {
    for (const auto& order : orders) {
      for (std::uint32_t negate : {0u, 1u, 5u, 7u}) {
        ResampleTester()
            .sizes({3, 5, 4})
            .scales({1.0f, 2.0f, 1.75f})
            .input_order(order)
            .input_negate(negate)
            .mode(mode)
            .Test();
      }
      ResampleTester().sizes({3, 5, 4}).scales({0.7f, 2.0f, 1.5f}).input_broadcast(2u).output_gaps().mode(mode).Test();
      ResampleTester()
          .sizes({3, 5, 4})
          .scales({1.0f, 2.0f, 3.0f})
          .output_order(order)
          .output_gaps()
          .mode(mode)
          .dtype(DataType::Float16)
          .Test();
    }
  }
  // Channels-last (NHWC memory) upsampling: the channel axis innermost in both tensors.
  for (InterpolationMode mode : kModes) {
    ResampleTester().sizes({1, 3, 6, 7}).upsample_2d(2, 2).input_order({0, 2, 3, 1}).output_order({0, 2, 3, 1}).mode(mode).Test();
  }
}

// ---------------------------------------------------------------------------------------------
// Validation: every rule, with the message naming the operator, the field and the rule.

ResampleDesc resample3(Dims sizes, std::vector<float> scales) {
  ResampleDesc d;
  d.input = {DataType::Float32, sizes, std::nullopt};
  d.scales = std::move(scales);
  return d;
}

// The message of the exception contains `part`.
::testing::AssertionResult Mentions(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message \"" << message << "\" lacks \"" << part << "\"";
}

TEST(Resample, Validation) {
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { infer_output(resample3({2, 3}, {1.0f})); }),
              "Resample3: scales has 1 entries but the input has 2 dimensions"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { infer_output(resample3({2, 3}, {1.0f, 0.0f})); }),
              "scales[1] is 0; scales must be > 0"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { infer_output(resample3({2, 3}, {-1.0f, 1.0f})); }),
              "scales[0] is -1; scales must be > 0"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { infer_output(resample3({2, 3}, {1.0f, std::nanf("")})); }),
              "scales[1] is nan; it must be a finite FLOAT"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] {
                ResampleDesc d = resample3({2, 3}, {1.0f, 1.0f});
                d.input_pixel_offsets = {0.5f};
                infer_output(d);
              }),
              "input_pixel_offsets has 1 entries"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] {
                ResampleDesc d = resample3({2, 3}, {1.0f, 1.0f});
                d.output_pixel_offsets = {0.5f, INFINITY};
                infer_output(d);
              }),
              "output_pixel_offsets[1] is inf"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { infer_output(resample3({2, 3}, {1.0f, 0.2f})); }),
              "output size on dimension 1 is floor(3 x 0.2"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { infer_output(resample3({2, 3}, {1.0f, 1e30f})); }),
              "exceeds 2^48"));
  EXPECT_TRUE(Mentions(message_of<DTypeError>([] {
                ResampleDesc d = resample3({2, 3}, {1.0f, 1.0f});
                d.input.dtype = DataType::Int16;
                d.mode = InterpolationMode::Linear;
                infer_output(d);
              }),
              "linear interpolation needs float16, float32 or float64, not int16"));
  EXPECT_TRUE(Mentions(message_of<DTypeError>([] {
                ResampleDesc d = resample3({2, 3}, {1.0f, 1.0f});
                d.output = TensorDesc{DataType::Float16, {2, 3}, std::nullopt};
                infer_output(d);
              }),
              "output has dtype float16 but the input is float32"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] {
                ResampleDesc d = resample3({2, 3}, {1.0f, 1.0f});
                d.output = TensorDesc{DataType::Float32, {2, 3, 1}, std::nullopt};
                infer_output(d);
              }),
              "output has 3 dimensions but the input has 2"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { parse_interpolation_mode("bilinear"); }),
              "expected nearest_neighbor or linear"));
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([] { parse_axis_direction("up"); }), "increasing or decreasing"));

  Upsample2DDesc u;
  u.input = {DataType::Float32, {1, 2, 3}, std::nullopt};
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([&] { infer_output(u); }), "Upsample2D: input has 3 dimensions"));
  u.input.sizes = {1, 2, 3, 4};
  u.scale_height = 0;
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([&] { infer_output(u); }), "scale_size height is 0"));
  u.scale_height = 2;
  u.output = TensorDesc{DataType::Float32, {1, 2, 6, 5}, std::nullopt};
  EXPECT_TRUE(Mentions(message_of<InvalidArgument>([&] { infer_output(u); }),
              "output has sizes (1, 2, 6, 5) but the input sizes x scale_size are (1, 2, 6, 4)"));
}

TEST(Resample, OutputSizeRule) {
  EXPECT_EQ(resample_output_size("R", 0, 10, 0.7f), 7);  // the FLOAT 0.7 is 0.699999988
  EXPECT_EQ(resample_output_size("R", 0, 10, 0.35f), 3);
  EXPECT_EQ(resample_output_size("R", 0, 3, 1.0f / 3.0f), 1);
  EXPECT_EQ(resample_output_size("R", 0, 10, 2.55f), 25);
  EXPECT_EQ(resample_output_size("R", 0, (std::int64_t{1} << 25) + 1, 1.0), (std::int64_t{1} << 25) + 1);
  EXPECT_THROW(resample_output_size("R", 0, 3, 0.3), InvalidArgument);
}

TEST(Resample, RejectsBadViewsBeforeWriting) {
  const std::vector<float> src(6, 1.0f);
  std::vector<float> dst(12, -2.0f);
  ResampleDesc d = resample3({2, 3}, {2.0f, 1.0f});
  const TensorView in{DataType::Float32, {2, 3}, {12, 4}, const_cast<float*>(src.data())};
  EXPECT_THROW(execute(d, in, TensorView{DataType::Float32, {4, 2}, {8, 4}, dst.data()}), InvalidArgument);
  EXPECT_THROW(execute(d, in, TensorView{DataType::Float16, {4, 3}, {6, 2}, dst.data()}), DTypeError);
  EXPECT_THROW(execute(d, in, TensorView{DataType::Float32, {4, 3}, {0, 4}, dst.data()}), InvalidArgument);
  EXPECT_EQ(dst, std::vector<float>(12, -2.0f));
}

// The plan: nearest_neighbor is a separable gather (an integer scale repeats whole rows: each
// gathered once and copied), linear a separable filter in its cheapest pass order.
TEST(ResamplePlan, NearestGathersLinearFilters) {
  ThreadCountGuard guard(2);
  Upsample2DDesc up;
  up.input = TensorDesc{DataType::Float32, {1, 3, 8, 8}, std::nullopt};
  up.scale_height = 2;
  up.scale_width = 2;
  KernelPlan p = plan(up);
  EXPECT_EQ(p.algorithm, "gather");
  std::map<std::string, std::int64_t> tiles = testing::tiles_of(p);
  EXPECT_EQ(tiles.at("row_copies"), 2);
  EXPECT_EQ(tiles.at("rows"), 24);
  EXPECT_EQ(tiles.at("repeat_runs"), 1);
  EXPECT_EQ(p.tasks, 24);

  up.mode = InterpolationMode::Linear;
  p = plan(up);
  EXPECT_EQ(p.algorithm, "filter");
  tiles = testing::tiles_of(p);
  EXPECT_EQ(tiles.at("pass1"), 3);  // upsampling: the horizontal pass on the smaller array
  EXPECT_EQ(tiles.at("pass2"), 2);
  EXPECT_EQ(p.tasks, 3);

  ResampleDesc down;
  down.input = TensorDesc{DataType::Float64, {1, 3, 8, 8}, std::nullopt};
  down.mode = InterpolationMode::Linear;
  down.scales = {1, 1, 0.5f, 0.5f};
  p = plan(down);
  tiles = testing::tiles_of(p);
  EXPECT_EQ(tiles.at("pass1"), 2);  // downsampling: the vertical pass shrinks first
  EXPECT_EQ(tiles.at("pass2"), 3);
  EXPECT_NE(p.reason.find("pairs kernel"), std::string::npos) << p.reason;
  down.antialiased = true;
  EXPECT_NE(plan(down).reason.find("wider filters tap by tap"), std::string::npos);

  down.scales = {1, 1, 1, 1};  // every axis the identity: a copy
  EXPECT_EQ(plan(down).algorithm, "copy");
  down.scales = {1, 1, 0, 1};
  EXPECT_EQ(message_of<InvalidArgument>([&] { plan(down); }), message_of<InvalidArgument>([&] { infer_output(down); }));
}

}  // namespace
}  // namespace dmlops
