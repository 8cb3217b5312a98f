// Padding / Padding1 (docs/semantics/padding.md).
//
// PaddingTester builds one case (shape, pads, mode, dtype, input and output memory layout,
// thread count), runs dmlops::execute and checks every output element against a naive
// reference written here from the spec's rule, bit for bit; the TESTs below only enumerate
// cases. The reference folds an out-of-range coordinate back step by step, like the paper
// being folded in DirectML's pictures, instead of the library's modular formula, so the two
// are not the same code written twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/dtype.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/padding.hpp"
#include "test_support.hpp"

namespace dmlops {
namespace {

using testing::splitmix64;
using testing::ThreadCountGuard;

constexpr PaddingMode kModes[] = {PaddingMode::Constant, PaddingMode::Edge, PaddingMode::Reflection,
                                  PaddingMode::Symmetric, PaddingMode::Wrap};
constexpr const char* kModeNames[] = {"constant", "edge", "reflection", "symmetric", "wrap"};
const char* mode_name(PaddingMode m) { return kModeNames[static_cast<int>(m)]; }

// Two dtypes of every element width: padding moves bits, so width is what the kernel sees,
// but signedness or float-ness must not matter either.
constexpr DataType kWidthDtypes[] = {DataType::Int8,    DataType::UInt8, DataType::Float16, DataType::Int16,
                                     DataType::Float32, DataType::Int32, DataType::Float64, DataType::Int64};

constexpr std::byte kSentinel{0xa5};

std::string hex(std::uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

std::uint64_t width_mask(DataType dtype) {
  const std::size_t bytes = element_size(dtype);
  return bytes == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
}

std::uint64_t load_bits(const std::byte* p, std::size_t bytes) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, bytes);  // little-endian: the low `bytes` bytes
  return v;
}


// The spec's rule (section 1): output coordinate o on an axis of input size n with start pad s
// reads this input coordinate, or -1 for the padding value. Out-of-range coordinates are folded
// back one mirror (or one period) at a time until they land inside.
std::int64_t reference_source(PaddingMode mode, std::int64_t o, std::int64_t n, std::int64_t s) {
  std::int64_t i = o - s;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PaddingMode::Constant:
      return -1;
    case PaddingMode::Edge:
      return std::clamp<std::int64_t>(i, 0, n - 1);
    case PaddingMode::Reflection:  // mirror about the edge elements (edges not repeated)
      if (n == 1) return 0;        // spec Decision
      while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i;
      return i;
    case PaddingMode::Symmetric:  // mirror about the edges (edges repeated)
      while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - 1 - i;
      return i;
    case PaddingMode::Wrap:
      while (i < 0) i += n;
      while (i >= n) i -= n;
      return i;
  }
  return -2;
}


class PaddingTester {
 public:
  PaddingTester& sizes(Dims v) { sizes_ = v; return *this; }
  PaddingTester& start(Dims v) { start_ = v; return *this; }
  PaddingTester& end(Dims v) { end_ = v; return *this; }
  PaddingTester& mode(PaddingMode m) { mode_ = m; return *this; }
  PaddingTester& dtype(DataType d) { dtype_ = d; return *this; }
  // The padding value's bit pattern (default: random bits, NaN payloads included).
  PaddingTester& value_bits(std::uint64_t bits) { value_bits_ = bits; return *this; }
  // Memory order of the input axes, outermost first: {1, 0} stores a 2-D input transposed.
  PaddingTester& input_strides_permutation(std::vector<int> order) { permutation_ = std::move(order); return *this; }
  // Axes (bit mask) walked backwards in memory: negative strides, data() at the far end.
  PaddingTester& input_negate(std::uint32_t axes) { in_negate_ = axes; return *this; }
  // Axes (bit mask) with stride 0: one stored element broadcast along the axis.
  PaddingTester& input_broadcast(std::uint32_t axes) { in_broadcast_ = axes; return *this; }
  // Every steps[a]-th element along axis a (a sliced view).
  PaddingTester& input_steps(Dims steps) { in_steps_ = steps; return *this; }
  // Memory order of the output axes, outermost first.
  PaddingTester& output_strides_permutation(std::vector<int> order) {
    out_permutation_ = std::move(order);
    return *this;
  }
  // The output written into every steps[a]-th element of a bigger buffer.
  PaddingTester& output_steps(Dims steps) { out_steps_ = steps; return *this; }
  PaddingTester& output_negate(std::uint32_t axes) { out_negate_ = axes; return *this; }
  // Both buffers start one byte past an aligned address.
  PaddingTester& misaligned() { misalign_ = 1; return *this; }
  // Input elements cycle through these bit patterns instead of random bits.
  PaddingTester& input_pattern(std::vector<std::uint64_t> bits) { pattern_ = std::move(bits); return *this; }
  PaddingTester& threads(int n) { threads_ = n; return *this; }
  PaddingTester& seed(std::uint64_t s) { seed_ = s; return *this; }

  void Test() const {
    const int rank = sizes_.size();
    ASSERT_GE(rank, 1) << "tester misuse";
    ASSERT_EQ(start_.size(), rank) << "tester misuse";
    ASSERT_EQ(end_.size(), rank) << "tester misuse";
    const auto elem = static_cast<std::int64_t>(element_size(dtype_));
    const std::uint64_t mask = width_mask(dtype_);
    std::uint64_t rng = seed_;
    const std::uint64_t value = (value_bits_ ? *value_bits_ : splitmix64(rng)) & mask;

    // Input layout, in elements.
    const std::vector<int> order = permutation_.empty() ? identity_order(rank) : permutation_;
    const std::vector<int> out_order = out_permutation_.empty() ? identity_order(rank) : out_permutation_;
    ASSERT_EQ(static_cast<int>(order.size()), rank) << "tester misuse";
    ASSERT_EQ(static_cast<int>(out_order.size()), rank) << "tester misuse";
    const Dims in_steps = in_steps_.empty() ? Dims::filled(rank, 1) : in_steps_;
    Dims in_strides = Dims::filled(rank, 0);
    std::int64_t in_extent = 1;
    for (int k = rank - 1; k >= 0; --k) {
      const int a = order[static_cast<std::size_t>(k)];
      if ((in_broadcast_ >> a) & 1u) continue;
      in_strides[a] = in_steps[a] * in_extent;
      in_extent *= sizes_[a] * in_steps[a];
    }
    std::int64_t in_origin = 0;  // element [0,...,0], counted from the buffer start
    for (int a = 0; a < rank; ++a) {
      if ((in_negate_ >> a) & 1u) {
        in_origin += (sizes_[a] - 1) * in_strides[a];
        in_strides[a] = -in_strides[a];
      }
    }

    // Output layout.
    Dims out_sizes;
    for (int a = 0; a < rank; ++a) out_sizes.push_back(sizes_[a] + start_[a] + end_[a]);
    const Dims out_steps = out_steps_.empty() ? Dims::filled(rank, 1) : out_steps_;
    Dims out_strides = Dims::filled(rank, 0);
    std::int64_t out_extent = 1;
    for (int k = rank - 1; k >= 0; --k) {
      const int a = out_order[static_cast<std::size_t>(k)];
      out_strides[a] = out_steps[a] * out_extent;
      out_extent *= out_sizes[a] * out_steps[a];
    }
    std::int64_t out_origin = 0;
    for (int a = 0; a < rank; ++a) {
      if ((out_negate_ >> a) & 1u) {
        out_origin += (out_sizes[a] - 1) * out_strides[a];
        out_strides[a] = -out_strides[a];
      }
    }

    std::vector<std::byte> in_buf(static_cast<std::size_t>(in_extent * elem + misalign_));
    for (std::int64_t k = 0; k < in_extent; ++k) {
      const std::uint64_t bits =
          pattern_.empty() ? splitmix64(rng) : pattern_[static_cast<std::size_t>(k) % pattern_.size()];
      std::memcpy(in_buf.data() + misalign_ + k * elem, &bits, static_cast<std::size_t>(elem));
    }
    std::vector<std::byte> out_buf(static_cast<std::size_t>(out_extent * elem + misalign_), kSentinel);
    const std::byte* in_base = in_buf.data() + misalign_ + in_origin * elem;
    std::byte* out_base = out_buf.data() + misalign_ + out_origin * elem;

    Dims in_byte_strides = in_strides, out_byte_strides = out_strides;
    for (std::int64_t& s : in_byte_strides) s *= elem;
    for (std::int64_t& s : out_byte_strides) s *= elem;

    PaddingDesc desc;
    desc.input = TensorDesc{dtype_, sizes_, in_strides};
    desc.mode = mode_;
    desc.value = Scalar{dtype_, value};
    desc.start_padding = start_;
    desc.end_padding = end_;
    const TensorView in_view{dtype_, sizes_, in_byte_strides, const_cast<std::byte*>(in_base)};
    const TensorView out_view{dtype_, out_sizes, out_byte_strides, out_base};

    const std::vector<std::byte> in_before = in_buf;
    {
      ThreadCountGuard guard(threads_);
      ASSERT_NO_THROW(execute(desc, in_view, out_view)) << describe(in_strides, out_strides);
    }
    EXPECT_TRUE(in_buf == in_before) << "the input was modified; " << describe(in_strides, out_strides);

    // Reference, element by element.
    std::vector<std::vector<std::int64_t>> source(static_cast<std::size_t>(rank));
    for (int a = 0; a < rank; ++a) {
      for (std::int64_t o = 0; o < out_sizes[a]; ++o)
        source[static_cast<std::size_t>(a)].push_back(reference_source(mode_, o, sizes_[a], start_[a]));
    }
    std::vector<bool> written(out_buf.size(), false);
    Dims index = Dims::filled(rank, 0);
    std::int64_t mismatches = 0;
    const std::int64_t total = out_sizes.product();
    for (std::int64_t flat = 0; flat < total; ++flat) {
      bool padding_value = false;
      std::int64_t in_offset = 0, out_offset = 0;
      for (int a = 0; a < rank; ++a) {
        const std::int64_t s = source[static_cast<std::size_t>(a)][static_cast<std::size_t>(index[a])];
        if (s < 0) padding_value = true;
        else in_offset += s * in_byte_strides[a];
        out_offset += index[a] * out_byte_strides[a];
      }
      const std::uint64_t want = padding_value ? value : load_bits(in_base + in_offset, static_cast<std::size_t>(elem));
      const std::uint64_t got = load_bits(out_base + out_offset, static_cast<std::size_t>(elem));
      const std::size_t first_byte = static_cast<std::size_t>(out_base + out_offset - out_buf.data());
      for (std::int64_t b = 0; b < elem; ++b) written[first_byte + static_cast<std::size_t>(b)] = true;
      if (want != got && ++mismatches <= 5) {
        ADD_FAILURE() << describe(in_strides, out_strides) << "\n  output index " << index << ": expected "
                      << hex(want) << " got " << hex(got);
      }
      for (int a = rank - 1; a >= 0; --a) {  // next index, last axis fastest
        if (++index[a] < out_sizes[a]) break;
        index[a] = 0;
      }
    }
    EXPECT_EQ(mismatches, 0) << "wrong elements in total; " << describe(in_strides, out_strides);

    std::int64_t stray = 0;
    for (std::size_t i = 0; i < out_buf.size(); ++i) stray += !written[i] && out_buf[i] != kSentinel;
    EXPECT_EQ(stray, 0) << "bytes written outside the output elements; " << describe(in_strides, out_strides);
  }

 private:
  static std::vector<int> identity_order(int rank) {
    std::vector<int> order(static_cast<std::size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    return order;
  }
  std::string describe(const Dims& in_strides, const Dims& out_strides) const {
    std::ostringstream s;
    s << "mode " << mode_name(mode_) << ", dtype " << name(dtype_) << ", sizes " << sizes_ << ", start " << start_
      << ", end " << end_ << ", input strides " << in_strides << ", output strides " << out_strides
      << " (elements)";
    if (misalign_) s << ", misaligned";
    if (threads_) s << ", threads " << *threads_;
    s << ", seed " << seed_;
    return s.str();
  }

  Dims sizes_, start_, end_;
  PaddingMode mode_ = PaddingMode::Constant;
  DataType dtype_ = DataType::Float32;
  std::optional<std::uint64_t> value_bits_;
  std::vector<int> permutation_, out_permutation_;
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
// Enumerations, one suite instance per mode.

class PaddingModeTest : public ::testing::TestWithParam<PaddingMode> {};

INSTANTIATE_TEST_SUITE_P(Padding, PaddingModeTest, ::testing::ValuesIn(kModes),
                         [](const ::testing::TestParamInfo<PaddingMode>& info) {
                           return std::string(mode_name(info.param));
                         });

TEST_P(PaddingModeTest, EveryRankAndElementWidth) {
  // Asymmetric pads, zero pads (identity axes the kernel may merge), a size-1 axis (reflection's
  // n == 1 Decision) and pads larger than the axis (4 on size 2, 3 on size 2).
  for (int rank = 1; rank <= kMaxRank; ++rank) {
    for (DataType dtype : kWidthDtypes) {
      PaddingTester()
          .sizes(first(rank, {3, 2, 4, 1, 2, 3, 2, 2}))
          .start(first(rank, {1, 0, 2, 1, 0, 1, 2, 0}))
          .end(first(rank, {0, 4, 1, 2, 1, 0, 1, 3}))
          .mode(GetParam())
          .dtype(dtype)
          .Test();
    }
  }
}

TEST_P(PaddingModeTest, PadsFromZeroToSeveralTimesTheInput) {
  using Pads = std::pair<std::int64_t, std::int64_t>;
  for (std::int64_t n : {1, 2, 3, 5}) {
    // Zero, smaller than, equal to, just over and several times the axis (7 on size 2 and 1).
    const std::int64_t seven = 7;
    for (std::int64_t pad : {std::int64_t{0}, std::int64_t{1}, n - 1, n, n + 1, 2 * n + 1, seven, 3 * n + 2}) {
      for (DataType dtype : {DataType::Float32, DataType::UInt8}) {
        for (const auto& [s, e] : {Pads{pad, 0}, Pads{0, pad}, Pads{pad, pad}, Pads{pad, 2}}) {
          PaddingTester().sizes({n}).start({s}).end({e}).mode(GetParam()).dtype(dtype).Test();
          // The padded axis outer, then inner, next to an identity axis.
          PaddingTester().sizes({n, 3}).start({s, 0}).end({e, 0}).mode(GetParam()).dtype(dtype).Test();
          PaddingTester().sizes({3, n}).start({0, s}).end({0, e}).mode(GetParam()).dtype(dtype).Test();
          PaddingTester().sizes({n, n}).start({s, e}).end({e, s}).mode(GetParam()).dtype(dtype).Test();
        }
      }
    }
  }
}

TEST_P(PaddingModeTest, TransposedAndNegativeInputStrides) {
  const std::vector<std::vector<int>> orders = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (DataType dtype : {DataType::UInt8, DataType::Float16, DataType::Float32, DataType::Int64}) {
    for (const auto& order : orders) {
      for (std::uint32_t negate = 0; negate < 8; ++negate) {
        PaddingTester()
            .sizes({3, 4, 5})
            .start({1, 2, 0})
            .end({2, 0, 3})
            .input_strides_permutation(order)
            .input_negate(negate)
            .mode(GetParam())
            .dtype(dtype)
            .Test();
      }
    }
  }
}

TEST_P(PaddingModeTest, BroadcastAndSlicedInputs) {
  for (DataType dtype : {DataType::Int8, DataType::Float16, DataType::Float32, DataType::Float64}) {
    for (std::uint32_t broadcast = 1; broadcast < 8; ++broadcast) {
      PaddingTester()
          .sizes({3, 4, 5})
          .start({1, 2, 0})
          .end({2, 0, 3})
          .input_broadcast(broadcast)
          .mode(GetParam())
          .dtype(dtype)
          .Test();
      // Broadcast on the padded axes with the others reversed.
      PaddingTester()
          .sizes({3, 4, 5})
          .start({2, 1, 3})
          .end({1, 3, 2})
          .input_broadcast(broadcast)
          .input_negate(~broadcast & 7u)
          .mode(GetParam())
          .dtype(dtype)
          .Test();
    }
    for (const Dims& steps : {Dims{1, 1, 2}, Dims{3, 1, 1}, Dims{2, 2, 2}, Dims{1, 3, 2}}) {
      PaddingTester()
          .sizes({3, 4, 5})
          .start({1, 0, 2})
          .end({0, 2, 1})
          .input_steps(steps)
          .mode(GetParam())
          .dtype(dtype)
          .Test();
      PaddingTester()
          .sizes({3, 4, 5})
          .start({1, 0, 2})
          .end({0, 2, 1})
          .input_steps(steps)
          .input_strides_permutation({2, 0, 1})
          .input_negate(5)
          .mode(GetParam())
          .dtype(dtype)
          .Test();
    }
  }
}

TEST_P(PaddingModeTest, StridedOutputs) {
  for (DataType dtype : {DataType::UInt8, DataType::Int16, DataType::Float32, DataType::UInt64}) {
    for (const Dims& steps : {Dims{1, 2}, Dims{2, 1}, Dims{3, 2}}) {
      for (std::uint32_t negate = 0; negate < 4; ++negate) {
        PaddingTester()
            .sizes({4, 5})
            .start({2, 1})
            .end({1, 6})
            .output_steps(steps)
            .output_negate(negate)
            .mode(GetParam())
            .dtype(dtype)
            .Test();
      }
    }
    // Transposed outputs: the kernel walks the output in memory order, so the innermost
    // loop lands on a different (padded or identity) axis each time.
    for (const auto& order : {std::vector<int>{2, 1, 0}, std::vector<int>{1, 2, 0}, std::vector<int>{0, 2, 1}}) {
      PaddingTester()
          .sizes({4, 5, 3})
          .start({0, 2, 1})
          .end({3, 0, 2})
          .output_strides_permutation(order)
          .mode(GetParam())
          .dtype(dtype)
          .Test();
    }
    // Strided on both sides, transposed input.
    PaddingTester()
        .sizes({4, 5, 3})
        .start({0, 2, 1})
        .end({3, 0, 2})
        .input_strides_permutation({2, 1, 0})
        .input_steps({2, 1, 3})
        .output_steps({1, 1, 2})
        .output_negate(2)
        .mode(GetParam())
        .dtype(dtype)
        .Test();
  }
}

TEST_P(PaddingModeTest, MisalignedBuffers) {
  for (DataType dtype : kWidthDtypes) {
    PaddingTester().sizes({3, 17}).start({1, 5}).end({2, 9}).misaligned().mode(GetParam()).dtype(dtype).Test();
    PaddingTester().sizes({40}).start({3}).end({21}).misaligned().mode(GetParam()).dtype(dtype).Test();
  }
}

TEST_P(PaddingModeTest, LargeTensorSplitAcrossThreads) {
  // 23 MB in, 24 MB out: many rows per thread. Odd thread counts leave uneven chunks.
  for (int threads : {1, 2, 3}) {
    PaddingTester()
        .sizes({64, 300, 300})
        .start({0, 3, 3})
        .end({0, 3, 3})
        .mode(GetParam())
        .dtype(DataType::Float32)
        .threads(threads)
        .Test();
  }
}

// Pads wider than the input make most rows copies of rows already written, several at a time
// where they repeat at one distance (a reflection's period): planes cut between threads at odd
// rows (the rows before a cut are another thread's), 1- and 4-byte elements, and a strided
// output whose rows are not back to back.
TEST_P(PaddingModeTest, WidePadsCopyEarlierRows) {
  for (int threads : {1, 2, 3, 7}) {
    for (DataType dtype : {DataType::Float32, DataType::UInt8}) {
      PaddingTester().sizes({5, 7, 9}).start({0, 23, 20}).end({0, 17, 26}).mode(GetParam()).dtype(dtype).threads(threads).Test();
      PaddingTester().sizes({3, 4, 3, 11}).start({0, 1, 30, 9}).end({1, 0, 9, 30}).mode(GetParam()).dtype(dtype).threads(threads).Test();
    }
    PaddingTester().sizes({5, 7, 9}).start({0, 23, 20}).end({0, 17, 26}).mode(GetParam()).output_steps({1, 1, 2}).threads(threads).Test();
    PaddingTester().sizes({5, 7, 9}).start({0, 23, 20}).end({0, 17, 26}).mode(GetParam()).output_steps({1, 2, 1}).threads(threads).Test();
  }
}

TEST_P(PaddingModeTest, RowsOfACopyAndAFewElements) {
  // Rows of one contiguous copy, at most 16 other elements and at most 4 fills or mirrored runs
  // are written one by one (plan(): border_elements, border_runs): a 5-D activation padded by
  // one, 16 and 17 elements (the limit), an image's borders of 16, a run and two elements, only
  // outer axes padded, on 1 to 7 threads (tasks that start inside a plane), misaligned, into
  // strided and backwards outputs.
  struct Case {
    Dims sizes, start, end;
  };
  const Case cases[] = {{{2, 3, 5, 9, 20}, {0, 0, 1, 1, 1}, {0, 0, 1, 1, 1}},
                        {{3, 6, 33}, {1, 2, 8}, {0, 3, 8}},
                        {{3, 6, 33}, {1, 2, 9}, {0, 3, 8}},
                        {{2, 3, 40}, {0, 1, 16}, {1, 0, 16}},
                        {{2, 3, 40}, {0, 1, 9}, {1, 0, 2}},
                        {{4, 5, 7}, {2, 3, 0}, {1, 0, 0}}};
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::Float32, DataType::UInt8, DataType::Float64}) {
      for (int threads : {1, 2, 3, 7}) {
        PaddingTester().sizes(c.sizes).start(c.start).end(c.end).mode(GetParam()).dtype(dtype).threads(threads).Test();
      }
      PaddingTester().sizes(c.sizes).start(c.start).end(c.end).mode(GetParam()).dtype(dtype).misaligned().Test();
      Dims steps = Dims::filled(c.sizes.size(), 1);
      steps[steps.size() - 2] = 2;
      PaddingTester().sizes(c.sizes).start(c.start).end(c.end).mode(GetParam()).dtype(dtype).output_steps(steps).output_negate(1u).Test();
    }
  }
}

// A border row's copy (copy_bytes) moves 32-byte vectors, the first unaligned, the others stored
// aligned, the last ending at the row's end: byte rows of 64 to 160 elements (every remainder
// modulo 32) padded by 1 to 3 (output rows at several offsets), also from a misaligned input
// (where bytes are permuted, the rows under 96 bytes are narrow rows instead).
TEST_P(PaddingModeTest, BorderCopiesOfEveryLengthAndAlignment) {
  for (std::int64_t width = 64; width <= 160; ++width) {
    for (std::int64_t pad : {1, 2, 3}) {
      PaddingTester().sizes({2, 3, width}).start({0, 1, pad}).end({0, 0, 4 - pad}).mode(GetParam()).dtype(DataType::UInt8).Test();
    }
    PaddingTester().sizes({2, 3, width}).start({0, 1, 1}).end({0, 0, 2}).mode(GetParam()).dtype(DataType::UInt8).misaligned().Test();
  }
}

TEST_P(PaddingModeTest, LongRowsSplitIntoColumnBlocks) {
  // A single 4 MB (or 1 MB) row: too few rows to share out, so the kernel splits the row
  // itself into column blocks, which a thread may start in the middle of a run.
  for (int threads : {1, 2, 3}) {
    PaddingTester()
        .sizes({1'000'000})
        .start({5})
        .end({1003})
        .mode(GetParam())
        .dtype(DataType::Float32)
        .threads(threads)
        .Test();
    PaddingTester()
        .sizes({1'000'000})
        .start({70'001})
        .end({3})
        .mode(GetParam())
        .dtype(DataType::UInt8)
        .threads(threads)
        .Test();
  }
  // A few long rows, some of them entirely padding.
  PaddingTester()
      .sizes({2, 100'000})
      .start({1, 3})
      .end({2, 40'000})
      .mode(GetParam())
      .dtype(DataType::Int16)
      .threads(2)
      .Test();
  PaddingTester()
      .sizes({2, 100'000})
      .start({1, 3})
      .end({2, 5})
      .input_negate(2)
      .output_steps({1, 2})
      .mode(GetParam())
      .dtype(DataType::Float64)
      .threads(3)
      .Test();
}

TEST_P(PaddingModeTest, NanPayloadsAreCopiedBitExactly) {
  // Quiet and signalling NaNs with payloads, infinities and -0: nothing may pass through a
  // float register that would quieten or canonicalise them.
  PaddingTester()
      .sizes({3, 7})
      .start({2, 3})
      .end({1, 4})
      .dtype(DataType::Float32)
      .input_pattern({0x7fc00123, 0x7f800001, 0xffbfffff, 0x7fffffff, 0xff800000, 0x80000000, 0xffc0beef})
      .value_bits(0x7fa00005)
      .mode(GetParam())
      .Test();
  PaddingTester()
      .sizes({3, 7})
      .start({2, 3})
      .end({1, 4})
      .dtype(DataType::Float16)
      .input_pattern({0x7c01, 0xfe03, 0x7e00, 0xfdff, 0x8000, 0x7d55, 0xfc00})
      .value_bits(0x7d01)
      .mode(GetParam())
      .Test();
  PaddingTester()
      .sizes({5, 3})
      .start({1, 1})
      .end({1, 1})
      .dtype(DataType::Float64)
      .input_pattern({0x7ff0000000000001, 0xfff8000000abcdef, 0x8000000000000000})
      .value_bits(0x7ff4000000000003)
      .mode(GetParam())
      .Test();
}

TEST_P(PaddingModeTest, RandomShapesAndLayouts) {
  // Everything at once, drawn at random: rank, sizes, pads, dtype, input order/reversal/
  // broadcast/slicing, output order/reversal/slicing, threads. Case i is reproducible from
  // the seed printed with it.
  const std::uint32_t seed = 7349 + static_cast<std::uint32_t>(GetParam());
  std::mt19937 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int i = 0; i < 150; ++i) {
    SCOPED_TRACE("random case " + std::to_string(i) + " of seed " + std::to_string(seed));
    const int rank = pick(1, 5);
    Dims sizes, start, end, in_steps, out_steps;
    std::vector<int> order(static_cast<std::size_t>(rank)), out_order(static_cast<std::size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    std::iota(out_order.begin(), out_order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    if (pick(0, 2) == 0) std::shuffle(out_order.begin(), out_order.end(), rng);
    for (int a = 0; a < rank; ++a) {
      sizes.push_back(pick(1, 6));
      start.push_back(pick(0, 3) == 0 ? 0 : pick(0, 9));
      end.push_back(pick(0, 3) == 0 ? 0 : pick(0, 9));
      in_steps.push_back(pick(1, 4) == 1 ? 2 : 1);
      out_steps.push_back(pick(1, 5) == 1 ? 3 : 1);
    }
    PaddingTester()
        .sizes(sizes)
        .start(start)
        .end(end)
        .mode(GetParam())
        .dtype(kWidthDtypes[pick(0, 7)])
        .input_strides_permutation(order)
        .input_negate(static_cast<std::uint32_t>(pick(0, 31)))
        .input_broadcast(pick(0, 4) == 0 ? static_cast<std::uint32_t>(pick(0, 31)) : 0u)
        .input_steps(in_steps)
        .output_strides_permutation(out_order)
        .output_negate(pick(0, 3) == 0 ? static_cast<std::uint32_t>(pick(0, 31)) : 0u)
        .output_steps(out_steps)
        .threads(pick(1, 3))
        .seed(seed * 1000u + static_cast<std::uint32_t>(i))
        .Test();
  }
}

TEST_P(PaddingModeTest, LibrarySourceIndexMatchesTheRule) {
  for (std::int64_t n = 1; n <= 7; ++n) {
    for (std::int64_t start = 0; start <= 20; ++start) {
      for (std::int64_t o = 0; o < n + start + 30; ++o) {
        ASSERT_EQ(padding_source_index(GetParam(), o, n, start), reference_source(GetParam(), o, n, start))
            << "o " << o << ", n " << n << ", start " << start;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// DirectML's worked examples (seed 000), verbatim.

constexpr int kExampleInput[4][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 2, 3, 4}, {5, 6, 7, 8}};

using Expected8x10 = int[8][10];
constexpr Expected8x10 kExampleConstant9 = {
    {9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, {9, 9, 1, 2, 3, 4, 9, 9, 9, 9}, {9, 9, 5, 6, 7, 8, 9, 9, 9, 9},
    {9, 9, 1, 2, 3, 4, 9, 9, 9, 9}, {9, 9, 5, 6, 7, 8, 9, 9, 9, 9}, {9, 9, 9, 9, 9, 9, 9, 9, 9, 9},
    {9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, {9, 9, 9, 9, 9, 9, 9, 9, 9, 9}};
constexpr Expected8x10 kExampleEdge = {
    {1, 1, 1, 2, 3, 4, 4, 4, 4, 4}, {1, 1, 1, 2, 3, 4, 4, 4, 4, 4}, {5, 5, 5, 6, 7, 8, 8, 8, 8, 8},
    {1, 1, 1, 2, 3, 4, 4, 4, 4, 4}, {5, 5, 5, 6, 7, 8, 8, 8, 8, 8}, {5, 5, 5, 6, 7, 8, 8, 8, 8, 8},
    {5, 5, 5, 6, 7, 8, 8, 8, 8, 8}, {5, 5, 5, 6, 7, 8, 8, 8, 8, 8}};
constexpr Expected8x10 kExampleReflection = {
    {7, 6, 5, 6, 7, 8, 7, 6, 5, 6}, {3, 2, 1, 2, 3, 4, 3, 2, 1, 2}, {7, 6, 5, 6, 7, 8, 7, 6, 5, 6},
    {3, 2, 1, 2, 3, 4, 3, 2, 1, 2}, {7, 6, 5, 6, 7, 8, 7, 6, 5, 6}, {3, 2, 1, 2, 3, 4, 3, 2, 1, 2},
    {7, 6, 5, 6, 7, 8, 7, 6, 5, 6}, {3, 2, 1, 2, 3, 4, 3, 2, 1, 2}};
constexpr Expected8x10 kExampleSymmetric = {
    {2, 1, 1, 2, 3, 4, 4, 3, 2, 1}, {2, 1, 1, 2, 3, 4, 4, 3, 2, 1}, {6, 5, 5, 6, 7, 8, 8, 7, 6, 5},
    {2, 1, 1, 2, 3, 4, 4, 3, 2, 1}, {6, 5, 5, 6, 7, 8, 8, 7, 6, 5}, {6, 5, 5, 6, 7, 8, 8, 7, 6, 5},
    {2, 1, 1, 2, 3, 4, 4, 3, 2, 1}, {6, 5, 5, 6, 7, 8, 8, 7, 6, 5}};

// Bit pattern of a small non-negative integer in `dtype`, computed without the library.
std::uint64_t small_int_bits(DataType dtype, int v) {
  switch (dtype) {
    case DataType::Float32: {
      const float f = static_cast<float>(v);
      std::uint32_t u;
      std::memcpy(&u, &f, 4);
      return u;
    }
    case DataType::Float64: {
      const double d = v;
      std::uint64_t u;
      std::memcpy(&u, &d, 8);
      return u;
    }
    case DataType::Float16: {
      if (v == 0) return 0;
      int e = 0;
      while ((v >> (e + 1)) != 0) ++e;  // v = 1.m * 2^e
      return static_cast<std::uint64_t>((e + 15) << 10 | ((v << 10 >> e) & 0x3ff));
    }
    default:
      return static_cast<std::uint64_t>(v);
  }
}

void check_directml_example(PaddingMode mode, const Expected8x10& expected, DataType dtype) {
  SCOPED_TRACE(std::string(mode_name(mode)) + " " + std::string(name(dtype)));
  const std::size_t elem = element_size(dtype);
  std::vector<std::byte> in(16 * elem), out(80 * elem, kSentinel);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      const std::uint64_t bits = small_int_bits(dtype, kExampleInput[r][c]);
      std::memcpy(in.data() + (r * 4 + c) * elem, &bits, elem);
    }
  }
  PaddingDesc desc;
  desc.input = TensorDesc{dtype, {1, 1, 4, 4}, std::nullopt};
  desc.mode = mode;
  desc.value = Scalar{dtype, mode == PaddingMode::Constant ? small_int_bits(dtype, 9) : 0};
  desc.start_padding = {0, 0, 1, 2};
  desc.end_padding = {0, 0, 3, 4};
  const auto e = static_cast<std::int64_t>(elem);
  ASSERT_EQ(infer_output(desc).sizes, (Dims{1, 1, 8, 10}));
  execute(desc, TensorView{dtype, {1, 1, 4, 4}, {16 * e, 16 * e, 4 * e, e}, in.data()},
          TensorView{dtype, {1, 1, 8, 10}, {80 * e, 80 * e, 10 * e, e}, out.data()});
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 10; ++c) {
      EXPECT_EQ(load_bits(out.data() + (r * 10 + c) * elem, elem), small_int_bits(dtype, expected[r][c]))
          << "output [0, 0, " << r << ", " << c << "] should be " << expected[r][c];
    }
  }
}

TEST(PaddingDirectMLExamples, Constant9) {
  for (DataType d : {DataType::Float32, DataType::Float16, DataType::Int8, DataType::UInt64})
    check_directml_example(PaddingMode::Constant, kExampleConstant9, d);
}
TEST(PaddingDirectMLExamples, Edge) {
  for (DataType d : {DataType::Float32, DataType::Float16, DataType::Int8, DataType::UInt64})
    check_directml_example(PaddingMode::Edge, kExampleEdge, d);
}
TEST(PaddingDirectMLExamples, Reflection) {
  for (DataType d : {DataType::Float32, DataType::Float16, DataType::Int8, DataType::UInt64})
    check_directml_example(PaddingMode::Reflection, kExampleReflection, d);
}
TEST(PaddingDirectMLExamples, Symmetric) {
  for (DataType d : {DataType::Float32, DataType::Float16, DataType::Int8, DataType::UInt64})
    check_directml_example(PaddingMode::Symmetric, kExampleSymmetric, d);
}

TEST(PaddingDirectMLExamples, FixtureHalfEncodingIsRight) {
  // The examples' float16 bits come from small_int_bits; pin a few against known encodings.
  EXPECT_EQ(small_int_bits(DataType::Float16, 1), 0x3c00u);
  EXPECT_EQ(small_int_bits(DataType::Float16, 5), 0x4500u);
  EXPECT_EQ(small_int_bits(DataType::Float16, 9), 0x4880u);
}

// ---------------------------------------------------------------------------------------------
// Names, output inference and validation.

TEST(PaddingModeNames, RoundTripAndUnknown) {
  for (PaddingMode m : kModes) {
    EXPECT_EQ(name(m), mode_name(m));
    EXPECT_EQ(parse_padding_mode(mode_name(m)), m);
  }
  EXPECT_EQ(static_cast<int>(PaddingMode::Constant), 0);  // DML_PADDING_MODE order
  EXPECT_EQ(static_cast<int>(PaddingMode::Symmetric), 3);
  EXPECT_THROW(parse_padding_mode("reflect"), InvalidArgument);
  EXPECT_THROW(parse_padding_mode("CONSTANT"), InvalidArgument);
  EXPECT_THROW(parse_padding_mode(""), InvalidArgument);
}

PaddingDesc example_desc() {
  PaddingDesc desc;
  desc.input = TensorDesc{DataType::Float32, {1, 1, 4, 4}, std::nullopt};
  desc.value = Scalar{DataType::Float32, 0x41100000};  // 9.0f
  desc.start_padding = {0, 0, 1, 2};
  desc.end_padding = {0, 0, 3, 4};
  return desc;
}

template <class E>
std::string error_of(const PaddingDesc& desc) {
  try {
    const TensorDesc out = infer_output(desc);
    ADD_FAILURE() << "infer_output accepted the descriptor; output sizes " << out.sizes;
  } catch (const E& e) {
    return e.what();
  }
  return {};
}

#define EXPECT_CONTAINS(haystack, needle)                                          \
  do {                                                                             \
    const std::string message_ = (haystack);                                       \
    EXPECT_NE(message_.find(needle), std::string::npos) << "message: " << message_; \
  } while (0)

TEST(PaddingInferOutput, SizesAreInputPlusPads) {
  PaddingDesc desc;
  desc.input = TensorDesc{DataType::Int16, {2, 3}, std::nullopt};
  desc.value = Scalar{DataType::Int16, 0};
  desc.start_padding = {1, 0};
  desc.end_padding = {2, 5};
  const TensorDesc out = infer_output(desc);
  EXPECT_EQ(out.dtype, DataType::Int16);
  EXPECT_EQ(out.sizes, (Dims{5, 8}));
  EXPECT_FALSE(out.strides.has_value());

  // A correct output desc is returned as given, strides included.
  desc.output = TensorDesc{DataType::Int16, {5, 8}, Dims{16, 2}};
  EXPECT_EQ(infer_output(desc), *desc.output);

  // Zero pads everywhere: same sizes.
  desc.output.reset();
  desc.start_padding = {0, 0};
  desc.end_padding = {0, 0};
  EXPECT_EQ(infer_output(desc).sizes, (Dims{2, 3}));
}

TEST(PaddingInferOutput, WrongEntryCounts) {
  PaddingDesc desc = example_desc();
  desc.end_padding = {0, 3, 4};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc),
                  "Padding1: end_padding has 3 entries but the input has 4 dimensions");
  desc = example_desc();
  desc.start_padding = {0, 0, 1, 2, 0};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "start_padding has 5 entries");
  desc = example_desc();
  desc.start_padding = {};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "start_padding");
  desc = example_desc();
  desc.op_name = "Padding";
  desc.end_padding = {1};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "Padding: end_padding has 1 entries");
}

TEST(PaddingInferOutput, NegativePads) {
  PaddingDesc desc = example_desc();
  desc.start_padding = {0, 0, -1, 2};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "start_padding[2]");
  desc = example_desc();
  desc.end_padding = {0, 0, 3, -4};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "end_padding[3]");
}

TEST(PaddingInferOutput, OutputDescMustMatch) {
  PaddingDesc desc = example_desc();
  desc.output = TensorDesc{DataType::Float32, {1, 1, 8, 9}, std::nullopt};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "output");
  desc.output = TensorDesc{DataType::Float32, {1, 8, 10}, std::nullopt};
  error_of<InvalidArgument>(desc);
  desc.output = TensorDesc{DataType::Float32, {1, 1, 8, 10}, Dims{80, 10, 1}};  // strides count
  error_of<InvalidArgument>(desc);
  desc.output = TensorDesc{DataType::Float32, {1, 1, 8, 0}, std::nullopt};
  error_of<InvalidArgument>(desc);
  desc.output = TensorDesc{DataType::Float16, {1, 1, 8, 10}, std::nullopt};
  EXPECT_CONTAINS(error_of<DTypeError>(desc), "float16");
  desc.output = TensorDesc{DataType::Float32, {1, 1, 8, 10}, std::nullopt};
  EXPECT_EQ(infer_output(desc).sizes, (Dims{1, 1, 8, 10}));
}

TEST(PaddingInferOutput, ValueMustHaveTheTensorDtype) {
  PaddingDesc desc = example_desc();
  desc.value = Scalar{DataType::Int32, 9};
  const std::string m = error_of<DTypeError>(desc);
  EXPECT_CONTAINS(m, "padding_value");
  EXPECT_CONTAINS(m, "int32");
  // Even when the mode ignores the value, its dtype field must agree (DirectML's rule).
  desc.mode = PaddingMode::Edge;
  error_of<DTypeError>(desc);
  desc.value = Scalar{DataType::Float64, 0};
  error_of<DTypeError>(desc);
}

TEST(PaddingInferOutput, InputDescAndModeRules) {
  PaddingDesc desc = example_desc();
  desc.input.sizes = {};
  desc.start_padding = {};
  desc.end_padding = {};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "input");
  desc = example_desc();
  desc.input.sizes = {1, 1, 0, 4};
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "sizes[2]");
  desc = example_desc();
  desc.input.strides = Dims{16, 4, 1};
  error_of<InvalidArgument>(desc);
  desc = example_desc();
  desc.mode = static_cast<PaddingMode>(7);
  EXPECT_CONTAINS(error_of<InvalidArgument>(desc), "padding_mode");
  desc = example_desc();
  desc.end_padding = {0, 0, 3, std::int64_t{1} << 50};  // an output no buffer can hold
  error_of<InvalidArgument>(desc);
  // Rank 8 is the limit and fine.
  desc.input = TensorDesc{DataType::Float32, Dims::filled(8, 1), std::nullopt};
  desc.start_padding = Dims::filled(8, 1);
  desc.end_padding = Dims::filled(8, 0);
  EXPECT_EQ(infer_output(desc).sizes, Dims::filled(8, 2));
}

TEST(PaddingInferOutput, HugePadsAreRejectedNotWrapped) {
  // input + start + end must not overflow int64 into a negative (or small) output size.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  PaddingDesc desc = example_desc();
  desc.start_padding = {0, 0, kMax, 2};
  error_of<InvalidArgument>(desc);
  desc = example_desc();
  desc.start_padding = {0, 0, std::int64_t{1} << 62, 2};
  desc.end_padding = {0, 0, std::int64_t{1} << 62, 4};
  error_of<InvalidArgument>(desc);
}

// execute() refuses bad views before writing anything: the output keeps its sentinel.
class PaddingExecuteRejects : public ::testing::Test {
 protected:
  static constexpr std::int64_t kIn = 16, kOut = 48;  // 4x4 input, 6x8 output (pads 1,1 / 1,3)
  void SetUp() override {
    desc_.input = TensorDesc{DataType::Float32, {4, 4}, std::nullopt};
    desc_.value = Scalar{DataType::Float32, 0x3f800000};
    desc_.start_padding = {1, 1};
    desc_.end_padding = {1, 3};
    // One buffer holding the input followed by room for the output.
    buffer_.assign(kIn + 2 * kOut, 0.0f);
    for (std::int64_t i = 0; i < kIn; ++i) buffer_[static_cast<std::size_t>(i)] = static_cast<float>(i + 1);
    for (std::size_t i = kIn; i < buffer_.size(); ++i) std::memset(&buffer_[i], 0xa5, 4);
    before_ = buffer_;
  }
  TensorView input() { return TensorView{DataType::Float32, {4, 4}, {16, 4}, buffer_.data()}; }
  TensorView output_at(std::int64_t element, Dims byte_strides = {32, 4}, Dims sizes = {6, 8},
                       DataType dtype = DataType::Float32) {
    return TensorView{dtype, sizes, byte_strides, buffer_.data() + element};
  }
  void expect_rejected(const TensorView& in, const TensorView& out, bool dtype_error = false) {
    if (dtype_error) EXPECT_THROW(execute(desc_, in, out), DTypeError);
    else EXPECT_THROW(execute(desc_, in, out), InvalidArgument);
    EXPECT_EQ(std::memcmp(buffer_.data(), before_.data(), buffer_.size() * 4), 0)
        << "memory changed by a rejected call";
  }
  PaddingDesc desc_;
  std::vector<float> buffer_, before_;
};

TEST_F(PaddingExecuteRejects, OutputOverlappingTheInput) {
  expect_rejected(input(), output_at(8));              // starts inside the input
  expect_rejected(input(), output_at(kIn - 1));        // shares one element
  expect_rejected(input(), output_at(kIn + kOut - 2, {-32, -4}));  // reversed, reaches into the input
  // In place with zero pads: the output is the input.
  desc_.start_padding = {0, 0};
  desc_.end_padding = {0, 0};
  expect_rejected(input(), output_at(0, {16, 4}, {4, 4}));
}

TEST_F(PaddingExecuteRejects, OutputWithOverlappingElements) {
  expect_rejected(input(), output_at(kIn, {0, 4}));    // zero stride
  expect_rejected(input(), output_at(kIn, {32, 0}));
  expect_rejected(input(), output_at(kIn, {16, 4}));   // rows interleave (row stride < row length)
  expect_rejected(input(), output_at(kIn, {4, 4}));
}

TEST_F(PaddingExecuteRejects, ViewsThatDoNotMatchTheDescriptor) {
  expect_rejected(input(), output_at(kIn, {28, 4}, {6, 7}));                              // output shape
  expect_rejected(input(), output_at(kIn, {32, 4}, {6, 8}, DataType::Int32), true);       // output dtype
  expect_rejected(TensorView{DataType::Float32, {4, 3}, {16, 4}, buffer_.data()}, output_at(kIn));  // input shape
  expect_rejected(TensorView{DataType::Int32, {4, 4}, {16, 4}, buffer_.data()}, output_at(kIn), true);
  expect_rejected(TensorView{DataType::Float32, {4, 4}, {16}, buffer_.data()}, output_at(kIn));  // strides count
}

TEST_F(PaddingExecuteRejects, InvalidDescriptor) {
  desc_.start_padding = {1, -1};
  expect_rejected(input(), output_at(kIn));
  desc_.start_padding = {1, 1};
  desc_.value = Scalar{DataType::Float64, 0};
  expect_rejected(input(), output_at(kIn), true);
}

TEST_F(PaddingExecuteRejects, AdjacentOutputIsAccepted) {
  // Right after the input in the same buffer: no shared byte, so it runs.
  execute(desc_, input(), output_at(kIn));
  EXPECT_EQ(buffer_[kIn + 0], 1.0f);                  // padding value at [0, 0]
  EXPECT_EQ(buffer_[kIn + 1 * 8 + 1], 1.0f);          // input [0, 0] at [1, 1]
  EXPECT_EQ(buffer_[kIn + 4 * 8 + 4], 16.0f);         // input [3, 3] at [4, 4]
  EXPECT_EQ(buffer_[kIn + 5 * 8 + 7], 1.0f);
  for (std::int64_t i = 0; i < kIn; ++i) EXPECT_EQ(buffer_[static_cast<std::size_t>(i)], static_cast<float>(i + 1));
}

TEST(PaddingV1, SaturatedFloatValueFillsIntegerTensors) {
  // DML_PADDING_OPERATOR_DESC's FLOAT value: truncated and saturated into integer tensors.
  PaddingDesc desc;
  desc.op_name = "Padding";
  desc.input = TensorDesc{DataType::UInt8, {2}, std::nullopt};
  desc.value = Scalar::saturating(DataType::UInt8, -1e10f);
  desc.start_padding = {1};
  desc.end_padding = {1};
  std::uint8_t in[2] = {7, 8}, out[4] = {0xee, 0xee, 0xee, 0xee};
  execute(desc, TensorView{DataType::UInt8, {2}, {1}, in}, TensorView{DataType::UInt8, {4}, {1}, out});
  EXPECT_EQ(std::vector<int>(out, out + 4), (std::vector<int>{0, 7, 8, 0}));

  desc.input.dtype = DataType::Int32;
  desc.value = Scalar::saturating(DataType::Int32, 9.7f);
  std::int32_t in32[2] = {-7, 8}, out32[4] = {};
  execute(desc, TensorView{DataType::Int32, {2}, {4}, in32}, TensorView{DataType::Int32, {4}, {4}, out32});
  EXPECT_EQ(std::vector<int>(out32, out32 + 4), (std::vector<int>{9, -7, 8, 9}));

  desc.value = Scalar::saturating(DataType::Float32, 9.7f);  // wrong dtype for an int32 tensor
  try {
    infer_output(desc);
    ADD_FAILURE() << "accepted";
  } catch (const DTypeError& e) {
    EXPECT_CONTAINS(e.what(), "Padding: padding_value");
  }
}

// The plan: the separable gather's path for the padding, pinned (a refactor cannot change it
// silently), and refused as infer_output refuses the descriptor.
TEST(PaddingPlan, TheGatherPathFollowsThePadding) {
  ThreadCountGuard guard(2);
  PaddingDesc desc;
  // (Input rows over 128 bytes: narrower ones are permuted whole with AVX-512, as the separable
  // gather's tests check.)
  desc.input = TensorDesc{DataType::Float32, {1, 3, 8, 40}, std::nullopt};
  desc.value = Scalar{DataType::Float32, 0};
  desc.mode = PaddingMode::Reflection;
  desc.start_padding = {0, 0, 2, 2};
  desc.end_padding = {0, 0, 2, 2};
  KernelPlan p = plan(desc);
  EXPECT_EQ(p.algorithm, "gather");
  EXPECT_EQ(p.isa, kernel_isa(KernelKind::Avx2));
  EXPECT_EQ(p.tasks, 36);
  EXPECT_EQ(p.threads, 2);
  // Rows of 44: the interior one copy, each two-element border gathered.
  std::map<std::string, std::int64_t> tiles = testing::tiles_of(p);
  EXPECT_EQ(tiles.at("rows"), 36);
  EXPECT_EQ(tiles.at("row"), 44);
  EXPECT_EQ(tiles.at("copy_runs"), 1);
  EXPECT_EQ(tiles.at("gather_runs"), 2);
  EXPECT_EQ(tiles.at("border_elements"), 4);  // rows of one copy and a few elements: one by one

  // Borders of 20 reflect as mirrored copies, a row's two runs besides its copy.
  desc.input = TensorDesc{DataType::Float32, {2, 40}, std::nullopt};
  desc.start_padding = {0, 20};
  desc.end_padding = {0, 20};
  tiles = testing::tiles_of(plan(desc));
  EXPECT_EQ(tiles.at("mirror_runs"), 2);
  EXPECT_EQ(tiles.at("copy_runs"), 1);
  EXPECT_EQ(tiles.count("gather_runs"), 0u);
  EXPECT_EQ(tiles.at("border_elements"), 0);
  EXPECT_EQ(tiles.at("border_runs"), 2);

  // Wrapped borders of 20 are copies too: more than one, so rows of another form.
  desc.mode = PaddingMode::Wrap;
  tiles = testing::tiles_of(plan(desc));
  EXPECT_EQ(tiles.at("copy_runs"), 3);
  EXPECT_EQ(tiles.count("border_elements"), 0u);
  desc.mode = PaddingMode::Reflection;

  // Nothing padded: one strided copy, the axes merged into one row.
  desc.start_padding = {0, 0};
  desc.end_padding = {0, 0};
  p = plan(desc);
  EXPECT_EQ(p.algorithm, "copy");
  EXPECT_EQ(testing::tiles_of(p).at("row"), 80);

  desc.start_padding = {0, -1};
  EXPECT_EQ(testing::message_of<InvalidArgument>([&] { plan(desc); }),
            testing::message_of<InvalidArgument>([&] { infer_output(desc); }));
}

}  // namespace
}  // namespace dmlops
