// Unfold / Fold (docs/semantics/unfold.md).
//
// WindowTester builds one case (sizes, window arrays, dtype, input and output memory layout,
// thread count), runs dmlops::execute and checks every output element against a naive
// reference written here from the spec's formulas, bit for bit; the TESTs below only enumerate
// cases. The unfold reference computes each output element on its own; the fold reference
// gathers (for each output position and tap, the one block that reads it, if any) where the
// library scatters, so the two are not the same code written twice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/dims.hpp"
#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/dtype.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/unfold.hpp"
#include "test_support.hpp"

namespace dmlops {
namespace {

constexpr std::byte kSentinel{0xa5};

// Two dtypes of every element width: unfold moves bits, so width is what its kernel sees.
constexpr DataType kWidthDtypes[] = {DataType::Int8,    DataType::UInt8, DataType::Float16, DataType::Int16,
                                     DataType::Float32, DataType::Int32, DataType::Float64, DataType::Int64};

std::string hex(std::uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

std::uint64_t load_bits(const std::byte* p, std::size_t bytes) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, bytes);  // little-endian: the low `bytes` bytes
  return v;
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

// Restores the default thread count when a case that changed it ends, however it ends.
struct ThreadCountGuard {
  explicit ThreadCountGuard(std::optional<int> n) : active(n.has_value()) {
    if (n) set_num_threads(*n);
  }
  ~ThreadCountGuard() {
    if (active) set_num_threads(default_num_threads());
  }
  bool active;
};

// A row-major index over `sizes` as a multi-index.
Dims unflatten(std::int64_t flat, const Dims& sizes) {
  Dims index = Dims::filled(sizes.size(), 0);
  for (int d = sizes.size() - 1; d >= 0; --d) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return index;
}

// Where a tensor of `sizes` lives in a buffer: strides (elements), the offset of element
// [0, ..., 0] and the buffer's length (elements).
struct Layout {
  Dims strides;
  std::int64_t origin = 0, extent = 1;
};

// order: memory order of the axes, outermost first (empty = row-major); steps: every
// steps[a]-th element; negate / broadcast: bit masks of axes walked backwards / with stride 0.
Layout make_layout(const Dims& sizes, const std::vector<int>& order_in, const Dims& steps_in, std::uint32_t negate,
                   std::uint32_t broadcast) {
  const int rank = sizes.size();
  if ((!order_in.empty() && static_cast<int>(order_in.size()) != rank) || (!steps_in.empty() && steps_in.size() != rank))
    throw std::logic_error("tester misuse: a layout's order and steps need one entry per dimension");
  std::vector<int> order = order_in;
  if (order.empty()) {
    order.resize(static_cast<std::size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
  }
  const Dims steps = steps_in.empty() ? Dims::filled(rank, 1) : steps_in;
  Layout layout{Dims::filled(rank, 0), 0, 1};
  for (int k = rank - 1; k >= 0; --k) {
    const int a = order[static_cast<std::size_t>(k)];
    if ((broadcast >> a) & 1u) continue;
    layout.strides[a] = steps[a] * layout.extent;
    layout.extent *= sizes[a] * steps[a];
  }
  for (int a = 0; a < rank; ++a) {
    if ((negate >> a) & 1u) {
      layout.origin += (sizes[a] - 1) * layout.strides[a];
      layout.strides[a] = -layout.strides[a];
    }
  }
  return layout;
}

enum class Op { Unfold, Fold };

class WindowTester {
 public:
  // {N, C, spatial...} of the unfold's input, which is the fold's output.
  WindowTester& sizes(Dims v) { sizes_ = v; return *this; }
  WindowTester& window(Dims v) { window_ = v; return *this; }
  WindowTester& strides(Dims v) { strides_ = v; return *this; }
  WindowTester& dilations(Dims v) { dilations_ = v; return *this; }
  WindowTester& start(Dims v) { start_ = v; return *this; }
  WindowTester& end(Dims v) { end_ = v; return *this; }
  WindowTester& dtype(DataType d) { dtype_ = d; return *this; }
  // Memory order of the input axes, outermost first.
  WindowTester& input_order(std::vector<int> order) { in_order_ = std::move(order); return *this; }
  WindowTester& input_negate(std::uint32_t axes) { in_negate_ = axes; return *this; }
  WindowTester& input_broadcast(std::uint32_t axes) { in_broadcast_ = axes; return *this; }
  WindowTester& input_steps(Dims steps) { in_steps_ = steps; return *this; }
  WindowTester& output_order(std::vector<int> order) { out_order_ = std::move(order); return *this; }
  WindowTester& output_negate(std::uint32_t axes) { out_negate_ = axes; return *this; }
  WindowTester& output_steps(Dims steps) { out_steps_ = steps; return *this; }
  // Both buffers start one byte past an aligned address.
  WindowTester& misaligned() { misalign_ = 1; return *this; }
  // Input elements cycle through these bit patterns instead of random ones.
  WindowTester& input_pattern(std::vector<std::uint64_t> bits) { pattern_ = std::move(bits); return *this; }
  WindowTester& threads(int n) { threads_ = n; return *this; }
  WindowTester& seed(std::uint64_t s) { seed_ = s; return *this; }

  void TestUnfold() const { Run(Op::Unfold); }
  void TestFold() const { Run(Op::Fold); }
  void Test() const {
    TestUnfold();
    TestFold();
  }

 private:
  int spatial_rank() const { return sizes_.size() - 2; }
  Dims fill_default(const Dims& v, std::int64_t value) const { return v.empty() ? Dims::filled(spatial_rank(), value) : v; }

  void Run(Op op) const {
    const int rank = spatial_rank();
    ASSERT_GE(rank, 1) << "tester misuse";
    ASSERT_EQ(window_.size(), rank) << "tester misuse";
    const Dims strides = fill_default(strides_, 1), dilations = fill_default(dilations_, 1);
    const Dims start = fill_default(start_, 0), end = fill_default(end_, 0);

    // The geometry, from the spec's formulas.
    Dims blocks;
    for (int d = 0; d < rank; ++d)
      blocks.push_back((sizes_[2 + d] + start[d] + end[d] - dilations[d] * (window_[d] - 1) - 1) / strides[d] + 1);
    const std::int64_t taps = window_.product(), block_count = blocks.product();
    const Dims cols_sizes{sizes_[0], sizes_[1] * taps, block_count};
    const Dims& in_sizes = op == Op::Unfold ? sizes_ : cols_sizes;
    const Dims& out_sizes = op == Op::Unfold ? cols_sizes : sizes_;

    const auto elem = static_cast<std::int64_t>(element_size(dtype_));
    const Layout in_layout = make_layout(in_sizes, in_order_, in_steps_, in_negate_, in_broadcast_);
    const Layout out_layout = make_layout(out_sizes, out_order_, out_steps_, out_negate_, 0);
    std::uint64_t rng = seed_;
    std::vector<std::byte> in_buf(static_cast<std::size_t>(in_layout.extent * elem + misalign_));
    for (std::int64_t k = 0; k < in_layout.extent; ++k) {
      const std::uint64_t bits = !pattern_.empty() ? pattern_[static_cast<std::size_t>(k) % pattern_.size()]
                                 : op == Op::Fold  ? summand_bits(rng)
                                                   : splitmix64(rng);
      std::memcpy(in_buf.data() + misalign_ + k * elem, &bits, static_cast<std::size_t>(elem));
    }
    std::vector<std::byte> out_buf(static_cast<std::size_t>(out_layout.extent * elem + misalign_), kSentinel);
    const std::byte* in_base = in_buf.data() + misalign_ + in_layout.origin * elem;
    std::byte* out_base = out_buf.data() + misalign_ + out_layout.origin * elem;
    Dims in_bytes = in_layout.strides, out_bytes = out_layout.strides;
    for (std::int64_t& s : in_bytes) s *= elem;
    for (std::int64_t& s : out_bytes) s *= elem;
    const TensorView in_view{dtype_, in_sizes, in_bytes, const_cast<std::byte*>(in_base)};
    const TensorView out_view{dtype_, out_sizes, out_bytes, out_base};

    const std::vector<std::byte> in_before = in_buf;
    {
      ThreadCountGuard guard(threads_);
      if (op == Op::Unfold) {
        UnfoldDesc desc{TensorDesc{dtype_, in_sizes, in_layout.strides}, std::nullopt, window_, strides, dilations,
                        start, end};
        ASSERT_EQ(infer_output(desc).sizes, out_sizes) << describe(op);
        ASSERT_NO_THROW(execute(desc, in_view, out_view)) << describe(op);
      } else {
        FoldDesc desc{TensorDesc{dtype_, in_sizes, in_layout.strides}, TensorDesc{dtype_, out_sizes, std::nullopt},
                      window_, strides, dilations, start, end};
        ASSERT_NO_THROW(execute(desc, in_view, out_view)) << describe(op);
      }
    }
    EXPECT_TRUE(in_buf == in_before) << "the input was modified; " << describe(op);

    // Reference, element by element.
    const auto input_bits = [&](const Dims& index) {
      std::int64_t offset = 0;
      for (int a = 0; a < index.size(); ++a) offset += index[a] * in_bytes[a];
      return load_bits(in_base + offset, static_cast<std::size_t>(elem));
    };
    std::vector<bool> written(out_buf.size(), false);
    std::int64_t mismatches = 0;
    const std::int64_t total = out_sizes.product();
    for (std::int64_t flat = 0; flat < total; ++flat) {
      const Dims index = unflatten(flat, out_sizes);
      std::uint64_t want = 0;
      if (op == Op::Unfold) {
        // out[n, c*K + k, b] = x[n, c, p] with p_d = b_d*stride + k_d*dilation - start, or 0.
        const Dims k = unflatten(index[1] % taps, window_), b = unflatten(index[2], blocks);
        Dims source{index[0], index[1] / taps};
        for (int d = 0; d < rank; ++d) {
          const std::int64_t p = b[d] * strides[d] + k[d] * dilations[d] - start[d];
          if (p < 0 || p >= sizes_[2 + d]) break;
          source.push_back(p);
        }
        if (source.size() == 2 + rank) want = input_bits(source);
      } else {
        // out[n, c, p] = sum over taps k (increasing) of cols[n, c*K + k, b] for the block b
        // with b_d*stride + k_d*dilation - start == p_d on every axis, if there is one.
        std::vector<std::uint64_t> terms;
        for (std::int64_t kflat = 0; kflat < taps; ++kflat) {
          const Dims k = unflatten(kflat, window_);
          std::int64_t col = 0;
          bool reads = true;
          for (int d = 0; d < rank && reads; ++d) {
            const std::int64_t shifted = index[2 + d] + start[d] - k[d] * dilations[d];
            reads = shifted >= 0 && shifted % strides[d] == 0 && shifted / strides[d] < blocks[d];
            col = col * blocks[d] + (reads ? shifted / strides[d] : 0);
          }
          if (reads) terms.push_back(input_bits({index[0], index[1] * taps + kflat, col}));
        }
        want = sum_bits(terms);
      }
      std::int64_t out_offset = 0;
      for (int a = 0; a < index.size(); ++a) out_offset += index[a] * out_bytes[a];
      const std::uint64_t got = load_bits(out_base + out_offset, static_cast<std::size_t>(elem));
      const auto first_byte = static_cast<std::size_t>(out_base + out_offset - out_buf.data());
      for (std::int64_t byte = 0; byte < elem; ++byte) written[first_byte + static_cast<std::size_t>(byte)] = true;
      if (want != got && ++mismatches <= 5) {
        ADD_FAILURE() << describe(op) << "\n  output index " << index << ": expected " << hex(want) << " got "
                      << hex(got);
      }
    }
    EXPECT_EQ(mismatches, 0) << "wrong elements in total; " << describe(op);
    std::int64_t stray = 0;
    for (std::size_t i = 0; i < out_buf.size(); ++i) stray += !written[i] && out_buf[i] != kSentinel;
    EXPECT_EQ(stray, 0) << "bytes written outside the output elements; " << describe(op);
  }

  // A fold input element: random bits for integers (sums wrap); for floats a finite value of
  // mixed magnitude, so sums round, and no NaN (whose payload an addition may take from
  // either operand).
  std::uint64_t summand_bits(std::uint64_t& rng) const {
    const std::uint64_t r = splitmix64(rng);
    const double value = std::ldexp(static_cast<double>(static_cast<std::int32_t>(r >> 32)) / 2147483648.0,
                                    static_cast<int>(r % 13) - 6);
    switch (dtype_) {
      case DataType::Float32: {
        const float f = static_cast<float>(value);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        return u;
      }
      case DataType::Float16: return float_to_half_bits(static_cast<float>(value));
      case DataType::Float64: {
        std::uint64_t u;
        std::memcpy(&u, &value, 8);
        return u;
      }
      default: return r;
    }
  }

  // The spec's sum of `terms` in order: float16 in float32 rounded once, floats in their own
  // type, integers modulo 2^width.
  std::uint64_t sum_bits(const std::vector<std::uint64_t>& terms) const {
    switch (dtype_) {
      case DataType::Float16: {
        float s = 0.0f;
        for (std::uint64_t t : terms) s += half_bits_to_float(static_cast<std::uint16_t>(t));
        return float_to_half_bits(s);
      }
      case DataType::Float32: {
        float s = 0.0f;
        for (std::uint64_t t : terms) {
          float f;
          const auto u = static_cast<std::uint32_t>(t);
          std::memcpy(&f, &u, 4);
          s += f;
        }
        std::uint32_t u;
        std::memcpy(&u, &s, 4);
        return u;
      }
      case DataType::Float64: {
        double s = 0.0;
        for (std::uint64_t t : terms) {
          double f;
          std::memcpy(&f, &t, 8);
          s += f;
        }
        std::uint64_t u;
        std::memcpy(&u, &s, 8);
        return u;
      }
      default: {
        std::uint64_t s = 0;
        for (std::uint64_t t : terms) s += t;
        const std::size_t bytes = element_size(dtype_);
        return bytes == 8 ? s : s & ((std::uint64_t{1} << (8 * bytes)) - 1);
      }
    }
  }

  std::string describe(Op op) const {
    std::ostringstream s;
    s << (op == Op::Unfold ? "unfold" : "fold") << " dtype " << name(dtype_) << ", sizes " << sizes_ << ", window "
      << window_ << ", strides " << strides_ << ", dilations " << dilations_ << ", start " << start_ << ", end "
      << end_;
    if (!in_order_.empty() || in_negate_ || in_broadcast_ || !in_steps_.empty())
      s << ", input layout (negate " << in_negate_ << ", broadcast " << in_broadcast_ << ", steps " << in_steps_ << ")";
    if (!out_order_.empty() || out_negate_ || !out_steps_.empty())
      s << ", output layout (negate " << out_negate_ << ", steps " << out_steps_ << ")";
    if (misalign_) s << ", misaligned";
    if (threads_) s << ", threads " << *threads_;
    s << ", seed " << seed_;
    return s.str();
  }

  Dims sizes_, window_, strides_, dilations_, start_, end_;
  DataType dtype_ = DataType::Float32;
  std::vector<int> in_order_, out_order_;
  std::uint32_t in_negate_ = 0, in_broadcast_ = 0, out_negate_ = 0;
  Dims in_steps_, out_steps_;
  std::int64_t misalign_ = 0;
  std::vector<std::uint64_t> pattern_;
  std::optional<int> threads_;
  std::uint64_t seed_ = 0x5eed;
};

Dims first(int rank, std::initializer_list<std::int64_t> values) {
  Dims d;
  for (std::int64_t v : values) {
    if (d.size() == rank) break;
    d.push_back(v);
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Enumerations

TEST(Unfold, EveryRankAndElementWidth) {
  for (int rank = 1; rank <= 6; ++rank) {
    for (DataType dtype : kWidthDtypes) {
      Dims sizes{2, 2};
      for (std::int64_t s : first(rank, {5, 3, 4, 2, 3, 2})) sizes.push_back(s);
      WindowTester()
          .sizes(sizes)
          .window(first(rank, {3, 2, 2, 1, 2, 2}))
          .strides(first(rank, {2, 1, 3, 1, 1, 2}))
          .dilations(first(rank, {1, 2, 1, 1, 2, 1}))
          .start(first(rank, {1, 0, 2, 0, 1, 1}))
          .end(first(rank, {0, 2, 1, 1, 0, 1}))
          .dtype(dtype)
          .TestUnfold();
    }
  }
}

TEST(Fold, EveryRankAndDtype) {
  for (int rank = 1; rank <= 6; ++rank) {
    for (DataType dtype : kAllDataTypes) {
      Dims sizes{2, 2};
      for (std::int64_t s : first(rank, {5, 3, 4, 2, 3, 2})) sizes.push_back(s);
      WindowTester()
          .sizes(sizes)
          .window(first(rank, {3, 2, 2, 1, 2, 2}))
          .strides(first(rank, {2, 1, 3, 1, 1, 2}))
          .dilations(first(rank, {1, 2, 1, 1, 2, 1}))
          .start(first(rank, {1, 0, 2, 0, 1, 1}))
          .end(first(rank, {0, 2, 1, 1, 0, 1}))
          .dtype(dtype)
          .TestFold();
    }
  }
}

TEST(UnfoldFold, EveryOneDimensionalGeometry) {
  // Windows wider than the input, strides wider than the window (gaps fold leaves at zero),
  // paddings wider than the input, dilated windows.
  for (std::int64_t in = 1; in <= 6; ++in)
    for (std::int64_t window = 1; window <= 4; ++window)
      for (std::int64_t stride = 1; stride <= 3; ++stride)
        for (std::int64_t dilation = 1; dilation <= 2; ++dilation)
          for (std::int64_t start = 0; start <= 3; ++start)
            for (std::int64_t end = 0; end <= 2; ++end) {
              if (in + start + end < (window - 1) * dilation + 1) continue;  // no block fits
              WindowTester()
                  .sizes({1, 2, in})
                  .window({window})
                  .strides({stride})
                  .dilations({dilation})
                  .start({start})
                  .end({end})
                  .dtype(DataType::Int32)
                  .Test();
            }
}

TEST(UnfoldFold, TwoDimensionalGeometries) {
  for (std::int64_t h : {1, 4, 7})
    for (std::int64_t w : {2, 5})
      for (const Dims& window : {Dims{1, 1}, Dims{3, 3}, Dims{2, 4}})
        for (const Dims& strides : {Dims{1, 1}, Dims{2, 3}})
          for (const Dims& dilations : {Dims{1, 1}, Dims{2, 1}})
            for (const Dims& pads : {Dims{0, 0, 0, 0}, Dims{1, 1, 1, 1}, Dims{2, 0, 0, 3}}) {
              const Dims start{pads[0], pads[1]}, end{pads[2], pads[3]};
              bool fits = true;
              for (int d = 0; d < 2; ++d)
                fits = fits && (d ? w : h) + start[d] + end[d] >= (window[d] - 1) * dilations[d] + 1;
              if (!fits) continue;
              WindowTester()
                  .sizes({2, 3, h, w})
                  .window(window)
                  .strides(strides)
                  .dilations(dilations)
                  .start(start)
                  .end(end)
                  .dtype(DataType::Float32)
                  .Test();
            }
}

TEST(UnfoldFold, TransposedNegativeAndSlicedInputs) {
  // Unfold reads {N, C, H, W}, fold reads {N, C*K, L}: each gets layouts of its own rank.
  const std::vector<std::vector<int>> orders4 = {{0, 1, 2, 3}, {0, 2, 3, 1}, {3, 2, 1, 0}, {1, 0, 3, 2}};
  const std::vector<std::vector<int>> orders3 = {{0, 1, 2}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}};
  for (DataType dtype : {DataType::UInt8, DataType::Float16, DataType::Float32, DataType::Int64}) {
    const auto tester = [&] {
      return WindowTester().sizes({2, 3, 5, 6}).window({2, 3}).strides({1, 2}).start({1, 1}).end({0, 2}).dtype(dtype);
    };
    for (std::uint32_t negate : {0u, 1u, 6u, 8u, 15u}) {
      for (const auto& order : orders4) tester().input_order(order).input_negate(negate).TestUnfold();
      for (const auto& order : orders3) tester().input_order(order).input_negate(negate & 7u).TestFold();
    }
    for (const Dims& steps : {Dims{1, 1, 1, 2}, Dims{2, 3, 1, 1}, Dims{1, 2, 2, 2}}) {
      const auto dilated = [&] {
        return WindowTester().sizes({2, 3, 5, 6}).window({3, 2}).dilations({2, 1}).start({2, 0}).end({1, 1}).dtype(dtype);
      };
      dilated().input_steps(steps).TestUnfold();
      dilated().input_steps({steps[0], steps[1], steps[3]}).TestFold();
    }
  }
}

TEST(Unfold, BroadcastInputs) {
  for (DataType dtype : {DataType::Int8, DataType::Float32, DataType::Float64}) {
    for (std::uint32_t broadcast = 1; broadcast < 16; ++broadcast) {
      WindowTester()
          .sizes({2, 3, 4, 5})
          .window({2, 2})
          .strides({1, 2})
          .start({1, 0})
          .end({0, 1})
          .input_broadcast(broadcast)
          .dtype(dtype)
          .TestUnfold();
    }
  }
}

TEST(Fold, BroadcastInputs) {
  // The same column read by several rows or batches: a zero-stride input is still summed right.
  for (std::uint32_t broadcast = 1; broadcast < 8; ++broadcast) {
    WindowTester()
        .sizes({2, 2, 4, 5})
        .window({2, 2})
        .strides({1, 2})
        .start({1, 0})
        .end({0, 1})
        .input_broadcast(broadcast)
        .dtype(DataType::Float16)
        .TestFold();
  }
}

TEST(UnfoldFold, StridedAndTransposedOutputs) {
  for (DataType dtype : {DataType::UInt8, DataType::Int16, DataType::Float16, DataType::Float32, DataType::UInt64}) {
    for (std::uint32_t negate = 0; negate < 8; ++negate) {
      WindowTester()
          .sizes({2, 2, 5, 4})
          .window({3, 2})
          .start({1, 1})
          .end({1, 0})
          .output_steps({1, 2, 3})
          .output_negate(negate)
          .dtype(dtype)
          .TestUnfold();
      WindowTester()
          .sizes({2, 2, 5, 4})
          .window({3, 2})
          .start({1, 1})
          .end({1, 0})
          .output_steps({2, 1, 1, 3})
          .output_negate(negate * 2)
          .dtype(dtype)
          .TestFold();
    }
    WindowTester().sizes({2, 3, 5, 4}).window({2, 2}).output_order({2, 1, 0}).dtype(dtype).TestUnfold();
    WindowTester().sizes({2, 3, 5, 4}).window({2, 2}).output_order({3, 2, 0, 1}).dtype(dtype).TestFold();
  }
}

TEST(UnfoldFold, MisalignedBuffers) {
  for (DataType dtype : kAllDataTypes) {
    WindowTester().sizes({1, 2, 9, 17}).window({3, 3}).start({1, 1}).end({1, 1}).misaligned().dtype(dtype).Test();
    WindowTester().sizes({2, 1, 40}).window({5}).strides({2}).start({3}).misaligned().dtype(dtype).Test();
  }
}

TEST(UnfoldFold, WorkSplitAcrossThreads) {
  // Many planes (split by rows / planes), one long 1-D row (unfold splits it by blocks, fold
  // by output slabs) and one tall plane. Odd thread counts leave uneven chunks.
  for (int threads : {1, 2, 3}) {
    WindowTester()
        .sizes({2, 24, 30, 33})
        .window({3, 3})
        .start({1, 1})
        .end({1, 1})
        .dtype(DataType::Float32)
        .threads(threads)
        .Test();
    WindowTester()
        .sizes({1, 1, 300'001})
        .window({4})
        .strides({3})
        .dilations({2})
        .start({5})
        .end({4})
        .dtype(DataType::Int16)
        .threads(threads)
        .Test();
    WindowTester()
        .sizes({1, 1, 700, 130})
        .window({3, 2})
        .strides({2, 1})
        .start({0, 1})
        .end({2, 0})
        .dtype(DataType::Float16)
        .threads(threads)
        .Test();
  }
}

TEST(Unfold, TwoAxesAsFillsAroundOneCopy) {
  // Two spatial axes: each output row is its tap's box of valid blocks copied at once, fills
  // around it. Stride 2 along the last axis (copied rows together), stride 1 (row by row, or one
  // run of whole rows), output rows as wide as the input's ("same" padding: a box is one copy
  // across its rows, zeros between them), taps whose box is empty in a piece of the rows
  // (paddings wider than the window), dilations, pieces split across 1 to 5 threads.
  struct Case {
    Dims sizes, window, strides, dilations, start, end;
  };
  const Case cases[] = {{{1, 2, 61, 112}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
                        {{1, 1, 300, 56}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
                        {{1, 1, 300, 20}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},
                        {{2, 1, 40, 9}, {2, 2}, {3, 2}, {2, 1}, {5, 3}, {4, 6}},
                        {{1, 1, 200, 33}, {3, 2}, {2, 2}, {1, 2}, {0, 1}, {2, 0}},
                        {{2, 3, 29, 31}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}},
                        {{1, 2, 41, 17}, {3, 5}, {1, 1}, {2, 1}, {0, 4}, {4, 0}}};
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::Float16, DataType::Float32, DataType::UInt8}) {
      for (int threads : {1, 2, 5}) {
        WindowTester()
            .sizes(c.sizes)
            .window(c.window)
            .strides(c.strides)
            .dilations(c.dilations)
            .start(c.start)
            .end(c.end)
            .dtype(dtype)
            .threads(threads)
            .Test();
      }
    }
  }
}

TEST(Unfold, ThreeTapsOfAStrideTwoRowAtOnce) {
  // A window 3 wide along the last axis with stride 2, padded by one at its start: with the byte
  // permute, a task writes the three taps of a row of the window, the rows of blocks that read
  // input rows at once. Two and three spatial axes, padding and strides along the others,
  // end padding read past the row, rows too short for it (under 64 bytes), pieces on 1 to 5
  // threads, every element width.
  struct Case {
    Dims sizes, window, strides, start, end;
    bool long_rows;  // 64 output bytes or more along the last axis, in uint8 too
  };
  const Case cases[] = {{{1, 2, 61, 150}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
                        {{2, 3, 9, 140}, {2, 3}, {3, 2}, {0, 1}, {2, 3}, true},
                        {{1, 1, 300, 140}, {1, 3}, {1, 2}, {0, 1}, {0, 0}, true},
                        {{1, 2, 5, 7, 140}, {3, 2, 3}, {1, 2, 2}, {1, 0, 1}, {1, 1, 1}, true},
                        {{1, 2, 9, 33}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false}};
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::UInt8, DataType::Float16, DataType::Float32, DataType::Float64}) {
      const Dims ones = Dims::filled(std::ssize(c.window), 1);
      const UnfoldDesc desc{TensorDesc{dtype, c.sizes, std::nullopt}, std::nullopt, c.window, c.strides, ones, c.start, c.end};
      const bool long_enough = c.long_rows || element_size(dtype) >= 4;
      EXPECT_EQ(testing::tiles_of(plan(desc)).at("tap_triples"), long_enough && avx512_vbmi_enabled() && platform::cpu_features().avx512_half_rate ? 1 : 0)
          << c.sizes;
      for (int threads : {1, 2, 5}) {
        WindowTester().sizes(c.sizes).window(c.window).strides(c.strides).start(c.start).end(c.end).dtype(dtype).threads(threads)
            .Test();
      }
    }
  }
}

// Unfold outputs larger than the last-level cache go out through a buffer in L1 and streaming
// stores, and fold prefetches columns that large (CTest runs this again with a 1 MiB L3 set by
// DMLOPS_CACHE_SIZES, where these take those paths): the plan says which, and the results
// match the reference either way, on 1 and 3 threads, and from buffers one byte off their
// elements' alignment (not streamed).
TEST(UnfoldFold, LargerThanTheCache) {
  struct Case {
    Dims sizes, window, strides, dilations, start, end;
    DataType dtype;
  };
  const Case cases[] = {
      {{2, 3, 20, 21, 22}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 0, 2}, {0, 1, 1}, DataType::Float32},
      {{1, 16, 140, 150}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, DataType::Float16},
      {{2, 5, 40000}, {5}, {1}, {2}, {3}, {1}, DataType::UInt8},
      {{1, 6, 10, 40, 64}, {3, 3, 3}, {1, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, DataType::Float16},  // tap triples
  };
  for (const Case& c : cases) {
    const UnfoldDesc desc{TensorDesc{c.dtype, c.sizes, std::nullopt}, std::nullopt, c.window, c.strides, c.dilations,
                          c.start, c.end};
    const TensorDesc out = infer_output(desc);
    const std::int64_t bytes = out.sizes.product() * static_cast<std::int64_t>(element_size(c.dtype));
    const bool past = bytes > platform::cache_sizes().l3;
    EXPECT_EQ(testing::tiles_of(plan(desc)).at("streamed"), past ? 1 : 0) << bytes;
    const FoldDesc fold{out, desc.input, c.window, c.strides, c.dilations, c.start, c.end};
    EXPECT_EQ(testing::tiles_of(plan(fold)).at("prefetched"), past && c.dtype != DataType::Float16 ? 1 : 0) << bytes;
    for (int threads : {1, 3}) {
      WindowTester tester;
      tester.sizes(c.sizes).window(c.window).strides(c.strides).dilations(c.dilations).start(c.start).end(c.end);
      tester.dtype(c.dtype).threads(threads).Test();
      tester.misaligned().Test();
    }
  }
}

TEST(Unfold, NanPayloadsAreCopiedBitExactly) {
  WindowTester()
      .sizes({1, 2, 3, 7})
      .window({2, 3})
      .start({1, 1})
      .end({1, 1})
      .dtype(DataType::Float32)
      .input_pattern({0x7fc00123, 0x7f800001, 0xffbfffff, 0x7fffffff, 0xff800000, 0x80000000, 0xffc0beef})
      .TestUnfold();
  WindowTester()
      .sizes({1, 2, 3, 7})
      .window({2, 3})
      .start({1, 1})
      .end({1, 1})
      .dtype(DataType::Float16)
      .input_pattern({0x7c01, 0xfe03, 0x7e00, 0xfdff, 0x8000, 0x7d55, 0xfc00})
      .TestUnfold();
}

TEST(UnfoldFold, RandomShapesAndLayouts) {
  // Everything at once, drawn at random: spatial rank, sizes, window arrays, dtype, input
  // order/reversal/slicing, output reversal/slicing, threads. Case i is reproducible from the
  // seed printed with it.
  const std::uint32_t seed = 9176;
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 150; ++i) {
    SCOPED_TRACE("random case " + std::to_string(i) + " of seed " + std::to_string(seed));
    const int rank = pick(1, 4);
    Dims sizes{pick(1, 2), pick(1, 3)}, window, strides, dilations, start, end, in_steps, out_steps;
    for (int d = 0; d < rank; ++d) {
      sizes.push_back(pick(1, rank <= 2 ? 8 : 4));
      window.push_back(pick(1, 3));
      strides.push_back(pick(1, 3));
      dilations.push_back(pick(1, 2));
      start.push_back(pick(0, 2));
      end.push_back(std::max<std::int64_t>(pick(0, 2), (window[d] - 1) * dilations[d] + 1 - sizes[2 + d] - start[d]));
    }
    for (int a = 0; a < sizes.size(); ++a) in_steps.push_back(pick(1, 4) == 1 ? 2 : 1);
    for (int a = 0; a < 3; ++a) out_steps.push_back(pick(1, 5) == 1 ? 3 : 1);
    std::vector<int> order(static_cast<std::size_t>(sizes.size()));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    WindowTester()
        .sizes(sizes)
        .window(window)
        .strides(strides)
        .dilations(dilations)
        .start(start)
        .end(end)
        .dtype(kAllDataTypes[pick(0, 10)])
        .input_order(order)
        .input_negate(static_cast<std::uint32_t>(pick(0, 63)))
        .input_steps(in_steps)
        .output_negate(static_cast<std::uint32_t>(pick(0, 7)))
        .output_steps(out_steps)
        .threads(pick(1, 3))
        .seed(seed * 1000u + static_cast<std::uint32_t>(i))
        .TestUnfold();
    WindowTester()
        .sizes(sizes)
        .window(window)
        .strides(strides)
        .dilations(dilations)
        .start(start)
        .end(end)
        .dtype(kAllDataTypes[pick(0, 10)])
        .input_negate(static_cast<std::uint32_t>(pick(0, 7)))
        .input_steps({in_steps[0], in_steps[1], 1 + (pick(0, 3) == 0)})
        .output_negate(static_cast<std::uint32_t>(pick(0, 63)))
        .threads(pick(1, 3))
        .seed(seed * 1000u + 500u + static_cast<std::uint32_t>(i))
        .TestFold();
  }
}

// ---------------------------------------------------------------------------------------------
// DirectML's worked examples (seed 004 for UNFOLD; the spec's FOLD check), verbatim.

TEST(UnfoldDirectMLExamples, RampWithAndWithoutPadding) {
  const int kExample1[9][9] = {{0, 1, 2, 5, 6, 7, 10, 11, 12},   {1, 2, 3, 6, 7, 8, 11, 12, 13},
                               {2, 3, 4, 7, 8, 9, 12, 13, 14},   {5, 6, 7, 10, 11, 12, 15, 16, 17},
                               {6, 7, 8, 11, 12, 13, 16, 17, 18}, {7, 8, 9, 12, 13, 14, 17, 18, 19},
                               {10, 11, 12, 15, 16, 17, 20, 21, 22}, {11, 12, 13, 16, 17, 18, 21, 22, 23},
                               {12, 13, 14, 17, 18, 19, 22, 23, 24}};
  const int kExample2[9][15] = {
      {0, 0, 0, 0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17},   {0, 0, 0, 1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18},
      {0, 0, 0, 2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19},   {0, 1, 2, 5, 6, 7, 10, 11, 12, 15, 16, 17, 20, 21, 22},
      {1, 2, 3, 6, 7, 8, 11, 12, 13, 16, 17, 18, 21, 22, 23}, {2, 3, 4, 7, 8, 9, 12, 13, 14, 17, 18, 19, 22, 23, 24},
      {5, 6, 7, 10, 11, 12, 15, 16, 17, 20, 21, 22, 0, 0, 0}, {6, 7, 8, 11, 12, 13, 16, 17, 18, 21, 22, 23, 0, 0, 0},
      {7, 8, 9, 12, 13, 14, 17, 18, 19, 22, 23, 24, 0, 0, 0}};
  std::vector<float> ramp(25);
  std::iota(ramp.begin(), ramp.end(), 0.0f);
  const TensorView in{DataType::Float32, {1, 1, 5, 5}, {100, 100, 20, 4}, ramp.data()};
  for (const bool padded : {false, true}) {
    SCOPED_TRACE(padded ? "example 2 (padded)" : "example 1");
    UnfoldDesc desc{TensorDesc{DataType::Float32, {1, 1, 5, 5}, std::nullopt}, std::nullopt, {3, 3}, {1, 1}, {1, 1},
                    padded ? Dims{1, 0} : Dims{0, 0}, padded ? Dims{1, 0} : Dims{0, 0}};
    const std::int64_t cols = padded ? 15 : 9;
    ASSERT_EQ(infer_output(desc).sizes, (Dims{1, 9, cols}));
    std::vector<float> out(static_cast<std::size_t>(9 * cols), -1.0f);
    execute(desc, in, TensorView{DataType::Float32, {1, 9, cols}, {36 * cols, 4 * cols, 4}, out.data()});
    for (int r = 0; r < 9; ++r) {
      for (int c = 0; c < cols; ++c) {
        EXPECT_EQ(out[static_cast<std::size_t>(r * cols + c)], padded ? kExample2[r][c] : kExample1[r][c])
            << "output [0, " << r << ", " << c << "]";
      }
    }
  }
}

TEST(FoldDirectMLExamples, SpecCheck) {
  const float kExpected[16] = {0, 5, 13, 9, 14, 38, 54, 32, 38, 86, 102, 56, 26, 57, 65, 35};
  std::vector<float> cols(36);
  std::iota(cols.begin(), cols.end(), 0.0f);
  std::vector<float> out(16, -1.0f);
  FoldDesc desc{TensorDesc{DataType::Float32, {1, 9, 4}, std::nullopt},
                TensorDesc{DataType::Float32, {1, 1, 4, 4}, std::nullopt}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}};
  execute(desc, TensorView{DataType::Float32, {1, 9, 4}, {144, 16, 4}, cols.data()},
          TensorView{DataType::Float32, {1, 1, 4, 4}, {64, 64, 16, 4}, out.data()});
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[static_cast<std::size_t>(i)], kExpected[i]) << "output element " << i;
}

// ---------------------------------------------------------------------------------------------
// Fold's arithmetic.

// Folds a 1-D {1, 3, 3} input onto one output position: window 3 with padding 2 on each side
// slides to 3 blocks, and position 0 is tap 2 of block 0, tap 1 of block 1 and tap 0 of
// block 2, summed in that order (increasing tap). The other six entries read padding and are
// dropped, so they hold values that would show if they were not.
template <class T>
T fold_three_terms(DataType dtype, T first, T second, T third, T dropped) {
  T cols[3][3] = {{dropped, dropped, first}, {dropped, second, dropped}, {third, dropped, dropped}};
  T out{};
  const auto e = static_cast<std::int64_t>(sizeof(T));
  FoldDesc desc{TensorDesc{dtype, {1, 3, 3}, std::nullopt}, TensorDesc{dtype, {1, 1, 1}, std::nullopt}, {3}, {1},
                {1}, {2}, {2}};
  execute(desc, TensorView{dtype, {1, 3, 3}, {9 * e, 3 * e, e}, &cols[0][0]}, TensorView{dtype, {1, 1, 1}, {e, e, e}, &out});
  return out;
}

TEST(Fold, Float16SumsInFloat32AndRoundsOnce) {
  // 2048 + 1 + 1: float16 steps by 2 at 2048, so summing in float16 would stay at 2048; the
  // float32 sum 2050 is exact in float16.
  const Half sum = fold_three_terms<Half>(DataType::Float16, Half{float_to_half_bits(2048.0f)},
                                          Half{float_to_half_bits(1.0f)}, Half{float_to_half_bits(1.0f)},
                                          Half{float_to_half_bits(1000.0f)});
  EXPECT_EQ(half_bits_to_float(sum.bits), 2050.0f);
}

TEST(Fold, Float32SumsInIncreasingTapOrder) {
  // (1 + 2^24) - 2^24 = 0 in float32 (1 is lost), while 1 + (2^24 - 2^24) would be 1.
  EXPECT_EQ(fold_three_terms<float>(DataType::Float32, 1.0f, 16777216.0f, -16777216.0f, 99.0f), 0.0f);
}

TEST(Fold, IntegersWrapInTheirOwnWidth) {
  // 100 + 100 wraps to -56, then -56 - 128 wraps to 72.
  EXPECT_EQ(fold_three_terms<std::int8_t>(DataType::Int8, 100, 100, -128, 1), 72);
  EXPECT_EQ(fold_three_terms<std::uint16_t>(DataType::UInt16, 65535, 2, 65535, 7), 0);
  EXPECT_EQ(fold_three_terms<std::uint64_t>(DataType::UInt64, ~std::uint64_t{0}, 5, 1, 3), 5u);
  EXPECT_EQ(fold_three_terms<std::int64_t>(DataType::Int64, INT64_MAX, 1, 0, 3), INT64_MIN);
}

// ---------------------------------------------------------------------------------------------
// Output inference and validation.

#define EXPECT_CONTAINS(haystack, needle)                                          \
  do {                                                                             \
    const std::string message_ = (haystack);                                       \
    EXPECT_NE(message_.find(needle), std::string::npos) << "message: " << message_; \
  } while (0)

template <class E, class Desc>
std::string error_of(const Desc& desc) {
  try {
    const TensorDesc out = infer_output(desc);
    ADD_FAILURE() << "infer_output accepted the descriptor; output sizes " << out.sizes;
  } catch (const E& e) {
    return e.what();
  }
  return {};
}

UnfoldDesc unfold_example() {
  return UnfoldDesc{TensorDesc{DataType::Float32, {2, 3, 5, 5}, std::nullopt}, std::nullopt, {3, 3}, {1, 1}, {1, 1},
                    {0, 0}, {0, 0}};
}

FoldDesc fold_example() {
  return FoldDesc{TensorDesc{DataType::Float32, {2, 27, 9}, std::nullopt},
                  TensorDesc{DataType::Float32, {2, 3, 5, 5}, std::nullopt}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}};
}

TEST(UnfoldInferOutput, SizesAndGivenOutput) {
  UnfoldDesc desc = unfold_example();
  EXPECT_EQ(infer_output(desc), (TensorDesc{DataType::Float32, {2, 27, 9}, std::nullopt}));
  desc.output = TensorDesc{DataType::Float32, {2, 27, 9}, Dims{1, 2, 54}};  // strides are the caller's
  EXPECT_EQ(infer_output(desc), *desc.output);
  desc.output = TensorDesc{DataType::Float32, {2, 27, 8}, std::nullopt};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: output has sizes (2, 27, 8) but the input unfolds to (2, 27, 9)");
  desc.output = TensorDesc{DataType::Int32, {2, 27, 9}, std::nullopt};
  EXPECT_CONTAINS(error_of<DTypeError>(desc), "Unfold: output has dtype int32");
  desc = unfold_example();
  desc.input.sizes = {1, 1, 2, 2, 2, 2, 2, 2};  // six spatial dimensions: input rank 8
  desc.window_sizes = desc.strides = desc.dilations = Dims::filled(6, 1);
  desc.window_sizes[5] = 2;
  desc.start_padding = desc.end_padding = Dims::filled(6, 0);
  EXPECT_EQ(infer_output(desc).sizes, (Dims{1, 2, 32}));
}

TEST(UnfoldInferOutput, Errors) {
  UnfoldDesc desc = unfold_example();
  desc.input.sizes = {2, 3};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: input has 2 dimensions; it must have 3 to 8");
  for (Dims UnfoldDesc::*field : {&UnfoldDesc::window_sizes, &UnfoldDesc::strides, &UnfoldDesc::dilations,
                                  &UnfoldDesc::start_padding, &UnfoldDesc::end_padding}) {
    desc = unfold_example();
    desc.*field = {1};
    EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "has 1 entries but there are 2 spatial dimensions");
    desc.*field = {};  // DirectML requires every array: empty is not "default"
    EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "has 0 entries");
  }
  desc = unfold_example();
  desc.window_sizes = {3, 0};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: window_sizes[1] is 0; it must be >= 1");
  desc = unfold_example();
  desc.strides = {0, 1};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: strides[0] is 0");
  desc = unfold_example();
  desc.dilations = {1, 0};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: dilations[1] is 0");
  desc = unfold_example();
  desc.end_padding = {-1, 0};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: end_padding[0] is -1");
  desc = unfold_example();
  desc.window_sizes = {3, 6};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: on spatial dimension 1 the window extent 6");
  desc.start_padding = {0, 1};  // padding makes room
  EXPECT_EQ(infer_output(desc).sizes, (Dims{2, 54, 3}));
  desc = unfold_example();
  desc.input.sizes = {1, std::int64_t{1} << 40, std::int64_t{1} << 20, 4};
  desc.window_sizes = {std::int64_t{1} << 19, 2};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: input sizes");  // 2^64 bytes already
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "more than 2^62 bytes");
  // an input that fits (2^57 bytes) whose columns would not: C * prod(window) = 2^63
  desc.input.sizes = {1, std::int64_t{1} << 51, 4, 4};
  desc.window_sizes = {std::int64_t{1} << 6, std::int64_t{1} << 6};
  desc.start_padding = {60, 60};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Unfold: the output's row count is beyond 2^62");
  // (window - 1) * dilation + 1 with each factor allowed and the product past int64
  desc = unfold_example();
  desc.window_sizes = {(std::int64_t{1} << 24) + 1, 1};
  desc.dilations = {std::int64_t{1} << 40, 1};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc),
                  "Unfold: on spatial dimension 0 the window extent (window_sizes - 1) * dilation + 1 is beyond 2^62");
}

TEST(FoldInferOutput, Errors) {
  EXPECT_EQ(infer_output(fold_example()), fold_example().output);
  FoldDesc desc = fold_example();
  desc.input.sizes = {2, 27, 9, 1};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: input has 4 dimensions; it must have 3");
  desc = fold_example();
  desc.output.sizes = {2, 3};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: output has 2 dimensions; it must have 3 to 8");
  desc = fold_example();
  desc.output.dtype = DataType::Float64;
  EXPECT_CONTAINS(error_of<DTypeError>(desc), "Fold: output has dtype float64 but the input is float32");
  desc = fold_example();
  desc.strides = {1};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: strides has 1 entries but there are 2 spatial dimensions");
  desc = fold_example();
  desc.window_sizes = {0, 3};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: window_sizes[0] is 0");
  desc = fold_example();
  desc.input.sizes = {2, 26, 9};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: input sizes[1] is 26, which is not divisible by prod(window_sizes) = 9");
  desc = fold_example();
  desc.input.sizes = {2, 27, 10};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: input sizes[2] is 10 but the window slides to 9 blocks: (3, 3) per");
  desc = fold_example();
  desc.output.sizes = {1, 3, 5, 5};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: output sizes[0] (batch) is 1 but the input's is 2");
  desc = fold_example();
  desc.output.sizes = {2, 1, 5, 5};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: output sizes[1] (channels) is 1 but input sizes[1] / prod(window_sizes) = 27 / 9 = 3");
  desc = fold_example();
  desc.output.sizes = {2, 3, 2, 5};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Fold: on spatial dimension 0 the window extent 3");
}

TEST(UnfoldFoldExecute, ViewsAreCheckedBeforeAnyWrite) {
  std::vector<float> in(150, 1.0f), out(2 * 27 * 9, -5.0f);
  const TensorView in_view{DataType::Float32, {2, 3, 5, 5}, {300, 100, 20, 4}, in.data()};
  const TensorView out_view{DataType::Float32, {2, 27, 9}, {972, 36, 4}, out.data()};
  UnfoldDesc desc = unfold_example();
  TensorView wrong = out_view;
  wrong.sizes = {2, 27, 8};
  EXPECT_THROW(execute(desc, in_view, wrong), InvalidArgument);
  wrong = out_view;
  wrong.dtype = DataType::Int32;
  EXPECT_THROW(execute(desc, in_view, wrong), DTypeError);
  TensorView aliased = out_view;
  aliased.data = in.data();  // the output would overwrite the input
  EXPECT_THROW(execute(desc, in_view, aliased), InvalidArgument);
  TensorView overlapping = out_view;
  overlapping.byte_strides = {972, 0, 4};
  EXPECT_THROW(execute(desc, in_view, overlapping), InvalidArgument);
  desc.strides = {1};
  EXPECT_THROW(execute(desc, in_view, out_view), InvalidArgument);
  EXPECT_EQ(out, std::vector<float>(out.size(), -5.0f)) << "a rejected call wrote to the output";
  TensorView short_cols = out_view;
  short_cols.sizes = {2, 27, 8};
  EXPECT_THROW(execute(fold_example(), short_cols, in_view), InvalidArgument);
  EXPECT_EQ(in, std::vector<float>(in.size(), 1.0f)) << "a rejected fold wrote to its output";
}

// The plans: unfold's rows cut into pieces when they are too few for the threads, fold's planes
// into slabs.
TEST(UnfoldPlan, RowsAndSlabsFollowTheThreads) {
  UnfoldDesc unfold{TensorDesc{DataType::Float32, {1, 3, 8, 8}, std::nullopt}, std::nullopt, {3, 3}, {1, 1}, {1, 1},
                    {0, 0}, {0, 0}};
  FoldDesc fold{TensorDesc{DataType::Float32, {1, 27, 36}, std::nullopt},
                TensorDesc{DataType::Float32, {1, 3, 8, 8}, std::nullopt}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}};
  {
    ThreadCountGuard guard(2);
    KernelPlan p = plan(unfold);
    EXPECT_EQ(p.algorithm, "rows");
    EXPECT_EQ(p.tasks, 27);
    EXPECT_EQ(testing::tiles_of(p).at("pieces"), 1);
    p = plan(fold);
    EXPECT_EQ(p.algorithm, "slabs");
    EXPECT_EQ(testing::tiles_of(p).at("slab_rows"), 3);  // 8 rows cut for 4 tasks per thread over 3 planes
    EXPECT_EQ(p.tasks, 9);
    EXPECT_EQ(testing::tiles_of(p).at("in_place"), 1);  // packed float32 planes, stride 1
    FoldDesc strided = fold, half = fold;
    strided.strides = {2, 2};
    strided.input.sizes = {1, 27, 9};
    half.input.dtype = half.output.dtype = DataType::Float16;
    EXPECT_EQ(testing::tiles_of(plan(strided)).at("in_place"), 0);  // add_row's stride-2 slack
    EXPECT_EQ(testing::tiles_of(plan(half)).at("in_place"), 0);     // sums in float, stored rounded
  }
  ThreadCountGuard guard(1);
  UnfoldDesc one_row{TensorDesc{DataType::Float32, {1, 1, 64, 4096}, std::nullopt}, std::nullopt, {1, 1}, {1, 1},
                     {1, 1}, {0, 0}, {0, 0}};
  EXPECT_EQ(testing::tiles_of(plan(one_row)).at("pieces"), 4);
  EXPECT_EQ(plan(fold).tasks, 3 * 2);
  fold.input.sizes = {1, 27, 35};
  std::string refused;
  try {
    plan(fold);
  } catch (const InvalidArgument& e) {
    refused = e.what();
  }
  EXPECT_EQ(refused, error_of<InvalidArgument>(fold));
}

}  // namespace
}  // namespace dmlops
