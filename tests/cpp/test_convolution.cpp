// Convolution kernels against a naive reference written from the spec's formulas (loops over
// every output element and every term, in double), plus the adjoint identity and the rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/direct.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/ops/convolution.hpp"
#include "test_support.hpp"

namespace dmlops {
namespace {

using testing::float_at;
using testing::message_of;
using testing::store_float;
using testing::ThreadCountGuard;

// A tensor in a byte buffer with any axis order in memory (`order` lists the axes from
// outermost to innermost), so that kernels see channels-last and other strided views.
struct Tensor {
  DataType dtype;
  Dims sizes, byte_strides;
  std::vector<std::byte> bytes;

  Tensor(DataType t, const Dims& s, std::vector<int> order = {}) : dtype(t), sizes(s) {
    if (order.empty())
      for (int a = 0; a < s.size(); ++a) order.push_back(a);
    byte_strides = Dims::filled(s.size(), 0);
    std::int64_t step = static_cast<std::int64_t>(element_size(t));
    for (int i = s.size() - 1; i >= 0; --i) {
      byte_strides[order[static_cast<std::size_t>(i)]] = step;
      step *= s[order[static_cast<std::size_t>(i)]];
    }
    bytes.resize(static_cast<std::size_t>(step));
  }
  std::int64_t offset(const Dims& index) const {
    std::int64_t o = 0;
    for (int a = 0; a < sizes.size(); ++a) o += index[a] * byte_strides[a];
    return o;
  }
  double at(const Dims& index) const { return float_at(dtype, bytes.data() + offset(index)); }
  void set(const Dims& index, double v) { store_float(dtype, bytes.data() + offset(index), v); }
  TensorView view() { return TensorView{dtype, sizes, byte_strides, bytes.data()}; }
  TensorDesc desc() const { return TensorDesc{dtype, sizes, std::nullopt}; }
  template <class F>
  void for_each(F&& f) const {
    Dims index = Dims::filled(sizes.size(), 0);
    for (std::int64_t flat = 0, n = sizes.product(); flat < n; ++flat) {
      f(index);
      for (int a = sizes.size() - 1; a >= 0 && ++index[a] == sizes[a]; --a) index[a] = 0;
    }
  }
};

void fill_random(Tensor& t, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  t.for_each([&](const Dims& i) { t.set(i, normal(rng)); });
}

// The spec's formulas as loops: every output element sums its terms directly (forward), or
// every input element scatters (backward), in double; then bias and activation.
std::vector<double> reference(const ConvolutionDesc& d, const Tensor& x, const Tensor& w, const Tensor* b,
                              const Dims& out_sizes, std::vector<double>* magnitude) {
  const int D = x.sizes.size() - 2;
  const std::int64_t G = d.group_count;
  const Dims K(w.sizes.begin() + 2, w.sizes.end());
  const auto get = [&](const Dims& v, int a, std::int64_t fallback) { return v.empty() ? fallback : v[a]; };
  const Dims out_packed = packed_strides(out_sizes);
  std::vector<double> y(static_cast<std::size_t>(out_sizes.product())), mag(y.size());
  const bool forward = d.direction == ConvolutionDirection::Forward;
  const std::int64_t in_g = x.sizes[1] / G, out_g = out_sizes[1] / G;
  std::int64_t taps = K.product();
  const auto tap_of = [&](std::int64_t flat) {
    Dims t = Dims::filled(D, 0);
    for (int a = D - 1; a >= 0; --a) t[a] = flat % K[a], flat /= K[a];
    return t;
  };
  const auto filter_tap = [&](Dims t) {
    if (d.mode == ConvolutionMode::Convolution)
      for (int a = 0; a < D; ++a) t[a] = K[a] - 1 - t[a];
    return t;
  };
  x.for_each([&](const Dims& xi) {
    const std::int64_t n = xi[0], ic = xi[1], g = ic / in_g;
    for (std::int64_t oc_in_g = 0; oc_in_g < out_g; ++oc_in_g) {
      const std::int64_t oc = g * out_g + oc_in_g;
      for (std::int64_t tf = 0; tf < taps; ++tf) {
        const Dims t = tap_of(tf);
        Dims yi{n, oc};
        bool inside = true;
        for (int a = 0; a < D; ++a) {
          const std::int64_t s = get(d.strides, a, 1), dil = get(d.dilations, a, 1), start = get(d.start_padding, a, 0);
          std::int64_t o;
          if (forward) {  // i = o*s + t*dil - start  <=>  o = (i + start - t*dil) / s
            const std::int64_t num = xi[2 + a] + start - t[a] * dil;
            if (num < 0 || num % s != 0) inside = false;
            o = num / s;
          } else {
            o = xi[2 + a] * s + t[a] * dil - start;
          }
          inside = inside && o >= 0 && o < out_sizes[2 + a];
          yi.push_back(o);
        }
        if (!inside) continue;
        Dims wi = forward ? Dims{oc, ic - g * in_g} : Dims{ic, oc_in_g};
        for (std::int64_t v : filter_tap(t)) wi.push_back(v);
        std::int64_t flat = 0;
        for (int a = 0; a < yi.size(); ++a) flat += yi[a] * out_packed[a];
        y[static_cast<std::size_t>(flat)] += x.at(xi) * w.at(wi);
        mag[static_cast<std::size_t>(flat)] += std::abs(x.at(xi) * w.at(wi));
      }
    }
  });
  for (std::size_t i = 0; i < y.size(); ++i) {
    const std::int64_t oc = static_cast<std::int64_t>(i) / out_packed[1] % out_sizes[1];
    if (b) {
      Dims bi = Dims::filled(D + 2, 0);
      bi[1] = oc;
      y[i] += b->at(bi);
      mag[i] += std::abs(b->at(bi));
    }
    if (d.fused_activation) apply_activation(*d.fused_activation, &y[i], 1);
  }
  if (magnitude) *magnitude = mag;
  return y;
}

struct Case {
  ConvolutionDesc desc;
  Dims x_sizes, w_sizes;
  bool bias = true;
  std::vector<int> x_order, out_order;
  std::string algorithm;  // forced when not empty
};

Case random_case(std::mt19937& rng, DataType dtype) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  const int D = pick(1, 3);
  const std::int64_t G = pick(1, 3), cg = pick(1, 3), og = pick(1, 3), N = pick(1, 2);
  ConvolutionDesc& d = c.desc;
  d.direction = pick(0, 1) ? ConvolutionDirection::Forward : ConvolutionDirection::Backward;
  d.mode = pick(0, 1) ? ConvolutionMode::CrossCorrelation : ConvolutionMode::Convolution;
  d.group_count = G;
  const bool forward = d.direction == ConvolutionDirection::Forward;
  c.x_sizes = {N, G * cg};
  c.w_sizes = forward ? Dims{G * og, cg} : Dims{G * cg, og};
  for (int a = 0; a < D; ++a) {
    const std::int64_t k = pick(1, 3), s = pick(1, 3), dil = pick(1, 2), start = pick(0, 2), end = pick(0, 2);
    const std::int64_t extent = (k - 1) * dil + 1;
    c.w_sizes.push_back(k);
    d.strides.push_back(s);
    d.dilations.push_back(dil);
    d.start_padding.push_back(forward ? start : 0);
    d.end_padding.push_back(forward ? end : 0);
    d.output_padding.push_back(forward ? 0 : pick(0, 1));
    c.x_sizes.push_back(std::max<std::int64_t>(extent - start - end, 1) + pick(0, D == 3 ? 2 : 5));
  }
  c.bias = pick(0, 1);
  static const char* kActivations[] = {"relu", "sigmoid", "leaky_relu", "gelu", "identity"};
  if (pick(0, 2) == 0) {
    const std::string name = kActivations[pick(0, 4)];
    d.fused_activation = make_activation("Test", name, name == "leaky_relu" ? std::vector<float>{0.2f} : std::vector<float>{});
  }
  // Channels-last input and output for some cases: {N, S..., C} in memory.
  if (pick(0, 1)) {
    c.x_order = {0};
    for (int a = 0; a < D; ++a) c.x_order.push_back(2 + a);
    c.x_order.push_back(1);
    c.out_order = c.x_order;
  }
  (void)dtype;
  return c;
}

// Runs the case, checks it against the reference and returns the output's bytes.
std::vector<std::byte> run_case(const Case& c, DataType dtype, std::mt19937& rng, const std::string& context) {
  Tensor x(dtype, c.x_sizes, c.x_order), w(dtype, c.w_sizes);
  fill_random(x, rng);
  fill_random(w, rng);
  ConvolutionDesc d = c.desc;
  d.input = x.desc();
  d.filter = w.desc();
  const std::int64_t out_channels =
      d.direction == ConvolutionDirection::Forward ? c.w_sizes[0] : c.w_sizes[1] * d.group_count;
  Dims b_sizes = Dims::filled(c.x_sizes.size(), 1);
  b_sizes[1] = out_channels;
  Tensor b(dtype, b_sizes);
  fill_random(b, rng);
  if (c.bias) d.bias = b.desc();
  const TensorDesc out_desc = infer_output(d);
  Tensor y(dtype, out_desc.sizes, c.out_order);
  TensorView xv = x.view(), wv = w.view(), bv = b.view(), yv = y.view();
  execute(d, xv, wv, c.bias ? &bv : nullptr, yv, c.algorithm);
  std::vector<double> magnitude;
  const std::vector<double> expected = reference(d, x, w, c.bias ? &b : nullptr, out_desc.sizes, &magnitude);
  const double eps = dtype == DataType::Float64 ? 0x1p-52 : 0x1p-23;
  const std::int64_t length = c.w_sizes[1] * Dims(c.w_sizes.begin() + 2, c.w_sizes.end()).product() + c.x_sizes[1];
  std::size_t i = 0;
  y.for_each([&](const Dims& index) {
    double tol = 4.0 * static_cast<double>(length + 2) * eps * magnitude[i] + 8 * eps * (1 + std::abs(expected[i]));
    if (dtype == DataType::Float16) tol += 0x1p-11 * std::abs(expected[i]) + 0x1p-24;
    ASSERT_NEAR(y.at(index), expected[i], tol) << context << " at " << index;
    ++i;
  });
  return y.bytes;
}

TEST(Convolution, DxDispatchSample) {
  for (DataType dtype : {DataType::Float32, DataType::Float16, DataType::Float64}) {
    Tensor x(dtype, {1, 1, 3, 3}), w(dtype, {1, 1, 2, 2});
    double v = 1;
    x.for_each([&](const Dims& i) { x.set(i, v++); });
    w.for_each([&](const Dims& i) { w.set(i, 0.5); });
    ConvolutionDesc d;
    d.input = x.desc();
    d.filter = w.desc();
    Tensor y(dtype, infer_output(d).sizes);
    TensorView xv = x.view(), wv = w.view(), yv = y.view();
    execute(d, xv, wv, nullptr, yv);
    std::vector<double> got;
    y.for_each([&](const Dims& i) { got.push_back(y.at(i)); });
    EXPECT_EQ(got, (std::vector<double>{6, 8, 12, 14})) << name(dtype);
  }
}

TEST(Convolution, RandomCasesMatchTheReference) {
  std::mt19937 rng(2024);
  for (DataType dtype : {DataType::Float32, DataType::Float16, DataType::Float64}) {
    for (int trial = 0; trial < 120; ++trial) {
      const Case c = random_case(rng, dtype);
      run_case(c, dtype, rng, std::string(name(dtype)) + " trial " + std::to_string(trial));
      if (HasFatalFailure()) return;
    }
  }
}

// The direct depthwise path (one input channel per group) on rows wide enough for its vector
// blocks and their tails (out widths 70, 35, 34, 33, 8), multipliers 1 and 2, strides 1 to 3
// (phase-split rows), dilation, asymmetric padding, both modes, 1-D to 3-D, every dtype.
TEST(Convolution, DepthwiseWideRowsMatchTheReference) {
  std::mt19937 rng(31);
  struct Shape {
    Dims x, k, strides, dilations, start, end;
    std::int64_t multiplier;
  };
  const Shape shapes[] = {
      {{2, 3, 5, 70}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{1, 4, 6, 70}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 1}, 2},
      {{1, 2, 4, 69}, {2, 5}, {1, 2}, {1, 2}, {0, 3}, {1, 0}, 1},
      {{1, 2, 100}, {3}, {3}, {1}, {0}, {0}, 2},
      {{1, 2, 3, 4, 40}, {2, 2, 3}, {1, 1, 5}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}, 1},
  };
  for (DataType dtype : {DataType::Float32, DataType::Float16, DataType::Float64}) {
    for (const Shape& shape : shapes) {
      for (ConvolutionMode mode : {ConvolutionMode::CrossCorrelation, ConvolutionMode::Convolution}) {
        Case c;
        const std::int64_t C = shape.x[1];
        c.x_sizes = shape.x;
        c.w_sizes = {C * shape.multiplier, 1};
        for (std::int64_t k : shape.k) c.w_sizes.push_back(k);
        c.desc.group_count = C;
        c.desc.mode = mode;
        c.desc.strides = shape.strides;
        c.desc.dilations = shape.dilations;
        c.desc.start_padding = shape.start;
        c.desc.end_padding = shape.end;
        c.bias = true;
        run_case(c, dtype, rng, std::string(name(dtype)) + " depthwise " + std::to_string(shape.x.size() - 2) + "-D");
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The channel-interleaved depthwise path (enough channels for half a vector): channel counts
// that leave block tails (9, 17, 20, 35 over 16 or 8 lanes), strides 1 to 3, dilation,
// asymmetric and large padding, a 5 x 3 window, multiplier 2, 1-D rows cut into bands, 3-D,
// rows wide enough for several bands of slab, channels-last input and output, bias and
// activations, both modes, every dtype; each case at 1 and 3 threads, bit for bit the same.
TEST(Convolution, DepthwiseLanesMatchTheReference) {
  struct Shape {
    Dims x, k, strides, dilations, start, end;
    std::int64_t multiplier;
  };
  const Shape shapes[] = {
      {{1, 17, 9, 11}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{2, 20, 10, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{1, 9, 13, 14}, {3, 3}, {3, 2}, {1, 1}, {2, 0}, {0, 3}, 2},
      {{1, 35, 8, 9}, {5, 3}, {1, 1}, {2, 1}, {4, 1}, {4, 1}, 1},
      {{1, 17, 60, 56}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{1, 20, 200}, {3}, {2}, {2}, {1}, {2}, 2},
      {{1, 9, 5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 2}, {1, 1, 0}, 1},
  };
  static const char* kActivations[] = {"", "relu", "sigmoid"};
  std::mt19937 pick(5);
  for (DataType dtype : {DataType::Float32, DataType::Float16, DataType::Float64}) {
    for (const Shape& shape : shapes) {
      for (bool channels_last : {false, true}) {
        Case c;
        const std::int64_t C = shape.x[1];
        const int D = shape.x.size() - 2;
        c.x_sizes = shape.x;
        c.w_sizes = {C * shape.multiplier, 1};
        for (std::int64_t k : shape.k) c.w_sizes.push_back(k);
        c.desc.group_count = C;
        c.desc.mode = pick() % 2 ? ConvolutionMode::Convolution : ConvolutionMode::CrossCorrelation;
        c.desc.strides = shape.strides;
        c.desc.dilations = shape.dilations;
        c.desc.start_padding = shape.start;
        c.desc.end_padding = shape.end;
        c.bias = pick() % 3 != 0;
        const std::string activation = kActivations[pick() % 3];
        if (!activation.empty()) c.desc.fused_activation = make_activation("Test", activation, {});
        if (channels_last) {
          c.x_order = {0};
          for (int a = 0; a < D; ++a) c.x_order.push_back(2 + a);
          c.x_order.push_back(1);
          c.out_order = c.x_order;
        }
        const std::string context = std::string(name(dtype)) + " depthwise " + std::to_string(D) + "-D C " +
                                    std::to_string(C) + (channels_last ? " channels-last" : "");
        std::vector<std::byte> first;
        for (int threads : {1, 3}) {
          const ThreadCountGuard guard(threads);
          std::mt19937 rng(99);
          const std::vector<std::byte> bytes = run_case(c, dtype, rng, context + " threads " + std::to_string(threads));
          if (HasFatalFailure()) return;
          if (first.empty()) first = bytes;
          EXPECT_TRUE(bytes == first) << context << ": 3 threads differ from 1";
        }
      }
    }
  }
}

// Unpadded forward layers whose input planes serve as the padded planes in place (1x1, 3x3
// without padding; float32 / float64, dense planes) and the same layers on channels-last inputs
// and float16, which are copied; N > 1 and groups so the per-(n, channel) plane addresses vary.
TEST(Convolution, UnpaddedInputsReadInPlaceMatchTheReference) {
  std::mt19937 rng(77);
  for (DataType dtype : {DataType::Float32, DataType::Float64, DataType::Float16}) {
    for (std::int64_t k : {1, 3}) {
      for (bool channels_last : {false, true}) {
        Case c;
        c.x_sizes = {2, 12, 9, 37};
        c.w_sizes = {10, 6, k, k};
        c.desc.group_count = 2;
        c.bias = true;
        if (channels_last) c.x_order = c.out_order = {0, 2, 3, 1};
        run_case(c, dtype, rng, std::string(name(dtype)) + " k " + std::to_string(k) + (channels_last ? " nhwc" : ""));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// A layer with a reduction long enough (40 channels x 9 taps) for several position blocks per
// plane, output rows (45 and 23 wide) that make the GEMM micro-panels both whole row pieces and
// pieces of two rows, padded borders, stride 1 and 2, float32 and float16 (converted planes),
// and channels-last inputs (padded in blocks of channels: two whole blocks and a partial one).
TEST(Convolution, PositionBlocksAndRowPiecesMatchTheReference) {
  std::mt19937 rng(404);
  for (DataType dtype : {DataType::Float32, DataType::Float16}) {
    for (std::int64_t stride : {1, 2}) {
      for (bool channels_last : {false, true}) {
        if (channels_last && dtype == DataType::Float16) continue;  // the fill is the same code for every dtype
        Case c;
        c.x_sizes = {1, 40, 33, 45};
        c.w_sizes = {7, 40, 3, 3};
        c.desc.strides = {stride, stride};
        c.desc.start_padding = c.desc.end_padding = {1, 1};
        if (channels_last) c.x_order = {0, 2, 3, 1};
        run_case(c, dtype, rng,
                 std::string(name(dtype)) + " stride " + std::to_string(stride) + (channels_last ? " nhwc" : ""));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The direct algorithm's padded planes (PaddedPlane::fill_plane): uneven paddings, paddings
// taller than the input (rows wholly zero above and below), one column of input per row, bands
// of rows padded by each task (2 and 3 threads), float32 (rows copied whole) and float16
// (converted row by row); each case runs after others, so the reused scratch holds their values
// wherever a zero is not written.
TEST(Convolution, DirectPaddedPlanesMatchTheReference) {
  std::mt19937 rng(77);
  struct Shape {
    Dims x, start, end;
  };
  const Shape shapes[] = {{{1, 12, 5, 4}, {2, 3}, {4, 1}},
                          {{2, 12, 3, 4}, {6, 1}, {5, 2}},
                          {{1, 12, 9, 1}, {0, 2}, {1, 0}},
                          {{1, 12, 16, 11}, {1, 1}, {1, 1}}};
  for (DataType dtype : {DataType::Float32, DataType::Float16}) {
    for (int threads : {1, 2, 3}) {
      const ThreadCountGuard guard(threads);
      for (const Shape& shape : shapes) {
        Case c;
        c.x_sizes = shape.x;
        c.w_sizes = {32, 12, 3, 3};
        c.desc.start_padding = shape.start;
        c.desc.end_padding = shape.end;
        c.algorithm = "direct";
        std::ostringstream context;
        context << name(dtype) << " threads " << threads << " input " << shape.x;
        run_case(c, dtype, rng, context.str());
        if (HasFatalFailure()) return;
      }
    }
  }
}

// More output channels (262) than one L2 block of the filter's rows holds, a reduction (270)
// over two K blocks: B is then packed whole per position block, and A inside the product (one
// batch item, one position block) or up front (two batch items); 1 and 2 threads; float32 and
// float64 (whose rows are twice the bytes: the inline-A path at 1 thread); both modes (the
// filter read as plain rows or through its tap offsets).
TEST(Convolution, ManyOutputChannelsMatchTheReference) {
  std::mt19937 rng(262);
  for (DataType dtype : {DataType::Float32, DataType::Float64}) {
    for (std::int64_t batch : {1, 2}) {
      for (int threads : {1, 2}) {
        for (ConvolutionMode mode : {ConvolutionMode::CrossCorrelation, ConvolutionMode::Convolution}) {
          if (threads == 2 && mode == ConvolutionMode::Convolution) continue;  // the same paths as one thread
          ThreadCountGuard guard(threads);
          Case c;
          c.x_sizes = {batch, 30, 6, 9};
          c.w_sizes = {262, 30, 3, 3};
          c.desc.start_padding = c.desc.end_padding = {1, 0};
          c.desc.mode = mode;
          run_case(c, dtype, rng, std::string(name(dtype)) + " batch " + std::to_string(batch) + " threads " +
                                      std::to_string(threads) + " " + std::string(name(mode)));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// 1x1 layers with strides 2 and 3 (and mixed), which run as stride-1 layers of the strided
// view when no output reaches the padding: odd sizes (the last input row and column read or
// skipped), end padding that no output reaches (rewritten) or that one does (not rewritten),
// start padding (not rewritten), groups, bias with an activation, channels-last inputs,
// float16, and 100 output channels on one position block (channel blocks sharing one B);
// 1 and 2 threads.
TEST(Convolution, StridedPointwiseLayersMatchTheReference) {
  std::mt19937 rng(1101);
  struct Layer {
    Dims x_sizes, w_sizes, strides, start, end;
    std::int64_t groups;
  };
  const Layer layers[] = {
      {{1, 16, 13, 15}, {100, 16, 1, 1}, {2, 2}, {0, 0}, {0, 0}, 1},
      {{2, 12, 14, 11}, {10, 6, 1, 1}, {3, 3}, {0, 0}, {1, 0}, 2},  // end padding reached by no output
      {{1, 8, 12, 10}, {7, 8, 1, 1}, {2, 3}, {0, 0}, {1, 2}, 1},    // reached: read as zeros
      {{1, 8, 11, 9}, {13, 8, 1, 1}, {2, 2}, {1, 0}, {0, 1}, 1},    // start padding
      {{2, 10, 9, 1}, {5, 10, 1, 1}, {2, 1}, {0, 0}, {0, 0}, 1},
  };
  for (DataType dtype : {DataType::Float32, DataType::Float16, DataType::Float64}) {
    for (const Layer& layer : layers) {
      for (bool channels_last : {false, true}) {
        for (int threads : {1, 2}) {
          ThreadCountGuard guard(threads);
          Case c;
          c.x_sizes = layer.x_sizes;
          c.w_sizes = layer.w_sizes;
          c.desc.strides = layer.strides;
          c.desc.start_padding = layer.start;
          c.desc.end_padding = layer.end;
          c.desc.group_count = layer.groups;
          c.desc.fused_activation = make_activation("Test", "leaky_relu", std::vector<float>{0.2f});
          if (channels_last) c.x_order = c.out_order = {0, 2, 3, 1};
          run_case(c, dtype, rng,
                   std::string(name(dtype)) + " x " + std::to_string(layer.x_sizes[2]) + "x" +
                       std::to_string(layer.x_sizes[3]) + " strides " + std::to_string(layer.strides[0]) + "," +
                       std::to_string(layer.strides[1]) + (channels_last ? " nhwc" : "") + " threads " +
                       std::to_string(threads));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Backward scatters: into planes with margins (neighbouring taps of a stride-2 last axis added
// in pairs, an odd last tap alone, stride-1 and stride-3 runs, dilated taps, start and end
// padding, output padding, 1-D and 3-D), and, for an output cropped far inside the taps' reach,
// the window walker over the output planes; float32 and float16, 1 and 2 threads.
TEST(Convolution, BackwardScattersMatchTheReference) {
  struct Layer {
    Dims x_spatial, w_spatial, strides, dilations, start, end, output_padding;
    std::int64_t groups;
  };
  const Layer layers[] = {
      {{5, 6}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, 1},
      {{5, 7}, {3, 5}, {2, 2}, {1, 1}, {0, 2}, {1, 0}, {1, 1}, 2},
      {{4, 9}, {2, 3}, {1, 1}, {1, 1}, {1, 0}, {0, 1}, {0, 0}, 1},
      {{3, 5}, {3, 4}, {3, 3}, {2, 1}, {2, 1}, {0, 3}, {2, 1}, 1},
      {{17}, {6}, {2}, {1}, {2}, {3}, {1}, 3},
      {{3, 4, 5}, {2, 3, 4}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1}, {0, 1, 1}, {1, 0, 0}, 1},
      {{70, 70}, {3, 3}, {1, 1}, {1, 1}, {34, 34}, {34, 34}, {0, 0}, 1},  // 4 x 4 of a 72 x 72 reach
  };
  std::mt19937 rng(44);
  for (DataType dtype : {DataType::Float32, DataType::Float16}) {
    for (int threads : {1, 2}) {
      ThreadCountGuard guard(threads);
      for (const Layer& layer : layers) {
        Case c;
        c.x_sizes = {2, 3 * layer.groups};
        for (std::int64_t size : layer.x_spatial) c.x_sizes.push_back(size);
        c.w_sizes = {3 * layer.groups, 2};
        for (std::int64_t size : layer.w_spatial) c.w_sizes.push_back(size);
        c.desc.direction = ConvolutionDirection::Backward;
        c.desc.strides = layer.strides;
        c.desc.dilations = layer.dilations;
        c.desc.start_padding = layer.start;
        c.desc.end_padding = layer.end;
        c.desc.output_padding = layer.output_padding;
        c.desc.group_count = layer.groups;
        c.desc.fused_activation = make_activation("Test", "relu", std::vector<float>{});
        run_case(c, dtype, rng, std::string(name(dtype)) + " x " + std::to_string(layer.x_spatial[0]) + " kernel " +
                                    std::to_string(layer.w_spatial.back()) + " threads " + std::to_string(threads));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Backward layers run as one forward convolution per output phase (float32, a window wider
// than the stride, 16 output channels per group, >= 512 outputs per phase): windows narrower
// than, as wide as and wider than the stride, start padding beyond the window, output padding,
// 1-D to 3-D, groups, a channels-last input and output; 1 and 3 threads give the same bits.
TEST(Convolution, BackwardPhasesMatchTheReference) {
  struct Layer {
    Dims x_spatial, w_spatial, strides, start, end, output_padding;
    std::int64_t groups;
    bool channels_last;
  };
  const Layer layers[] = {
      {{16, 16}, {4, 4}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, 1, false},
      {{14, 20}, {2, 5}, {3, 2}, {0, 3}, {1, 0}, {0, 1}, 1, true},
      {{30, 14}, {3, 3}, {1, 3}, {4, 0}, {0, 5}, {0, 2}, 2, false},
      {{300}, {5}, {2}, {2}, {1}, {1}, 1, false},
      {{8, 9, 7}, {3, 2, 4}, {2, 2, 3}, {1, 0, 2}, {0, 0, 0}, {1, 0, 0}, 1, true},
  };
  std::mt19937 rng(45);
  for (const Layer& layer : layers) {
    const int D = layer.x_spatial.size();
    Case c;
    c.x_sizes = {2, 3 * layer.groups};
    for (std::int64_t size : layer.x_spatial) c.x_sizes.push_back(size);
    c.w_sizes = {3 * layer.groups, 16};
    for (std::int64_t size : layer.w_spatial) c.w_sizes.push_back(size);
    c.desc.direction = ConvolutionDirection::Backward;
    c.desc.mode = D == 2 ? ConvolutionMode::Convolution : ConvolutionMode::CrossCorrelation;
    c.desc.strides = layer.strides;
    c.desc.start_padding = layer.start;
    c.desc.end_padding = layer.end;
    c.desc.output_padding = layer.output_padding;
    c.desc.group_count = layer.groups;
    c.desc.fused_activation = make_activation("Test", "leaky_relu", std::vector<float>{0.2f});
    if (layer.channels_last) {
      c.x_order = {0};
      for (int a = 0; a < D; ++a) c.x_order.push_back(2 + a);
      c.x_order.push_back(1);
      c.out_order = c.x_order;
    }
    std::vector<std::vector<std::byte>> bits;
    const std::uint32_t seed = rng();  // the same inputs for both thread counts
    for (int threads : {1, 3}) {
      ThreadCountGuard guard(threads);
      std::mt19937 inputs(seed);
      bits.push_back(run_case(c, DataType::Float32, inputs, "x " + std::to_string(layer.x_spatial[0]) + " kernel " +
                                                                std::to_string(layer.w_spatial.back()) + " threads " +
                                                                std::to_string(threads)));
      if (HasFatalFailure()) return;
    }
    EXPECT_EQ(bits[0], bits[1]) << "x " << layer.x_spatial[0] << ": the thread count changed the bits";
  }
}

TEST(Convolution, ThreadCountsGiveIdenticalBits) {
  std::mt19937 rng(5);
  for (ConvolutionDirection direction : {ConvolutionDirection::Forward, ConvolutionDirection::Backward}) {
    const bool forward = direction == ConvolutionDirection::Forward;
    Tensor x(DataType::Float32, {2, 8, 21, 17}), w(DataType::Float32, forward ? Dims{12, 4, 3, 3} : Dims{8, 6, 3, 3});
    fill_random(x, rng);
    fill_random(w, rng);
    ConvolutionDesc d;
    d.input = x.desc();
    d.filter = w.desc();
    d.direction = direction;
    d.group_count = 2;
    d.strides = {2, 1};
    d.start_padding = {1, 1};
    d.end_padding = {1, 0};
    std::vector<std::vector<std::byte>> results;
    for (int threads : {1, 2, 3, 7}) {
      ThreadCountGuard guard(threads);
      Tensor y(DataType::Float32, infer_output(d).sizes);
      TensorView xv = x.view(), wv = w.view(), yv = y.view();
      execute(d, xv, wv, nullptr, yv);
      results.push_back(y.bytes);
    }
    for (const auto& r : results) EXPECT_EQ(r, results[0]) << name(direction);
  }
}

TEST(Convolution, AdjointIdentity) {
  // <forward(x, w), g> == <x, backward(g, w)> with the backward output sized like x.
  std::mt19937 rng(77);
  for (int trial = 0; trial < 60; ++trial) {
    Case c = random_case(rng, DataType::Float64);
    if (c.desc.direction == ConvolutionDirection::Backward) continue;
    Tensor x(DataType::Float64, c.x_sizes), w(DataType::Float64, c.w_sizes);
    fill_random(x, rng);
    fill_random(w, rng);
    ConvolutionDesc f = c.desc;
    f.fused_activation.reset();
    f.input = x.desc();
    f.filter = w.desc();
    Tensor y(DataType::Float64, infer_output(f).sizes), g(DataType::Float64, infer_output(f).sizes);
    fill_random(g, rng);
    TensorView xv = x.view(), wv = w.view(), yv = y.view(), gv = g.view();
    execute(f, xv, wv, nullptr, yv);
    ConvolutionDesc bwd = f;
    bwd.direction = ConvolutionDirection::Backward;
    bwd.input = g.desc();
    bwd.output = x.desc();
    Tensor xt(DataType::Float64, c.x_sizes);
    TensorView xtv = xt.view();
    execute(bwd, gv, wv, nullptr, xtv);
    double lhs = 0, rhs = 0, scale = 0;
    y.for_each([&](const Dims& i) { lhs += y.at(i) * g.at(i), scale += std::abs(y.at(i) * g.at(i)); });
    x.for_each([&](const Dims& i) { rhs += x.at(i) * xt.at(i); });
    EXPECT_NEAR(lhs, rhs, 1e-12 * (scale + 1)) << "trial " << trial;
  }
}

TEST(Convolution, RejectsEveryBrokenRule) {
  const auto f32 = [](Dims s) { return TensorDesc{DataType::Float32, s, std::nullopt}; };
  const auto base = [&] {
    ConvolutionDesc d;
    d.input = f32({1, 4, 5, 5});
    d.filter = f32({6, 2, 3, 3});
    d.group_count = 2;
    return d;
  };
  const auto expect = [&](auto mutate, const std::string& fragment, bool dtype_error = false) {
    ConvolutionDesc d = base();
    mutate(d);
    const std::string message = dtype_error ? message_of<DTypeError>([&] { infer_output(d); })
                                            : message_of<InvalidArgument>([&] { infer_output(d); });
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_EQ(message.rfind("Convolution", 0), 0u) << message;
  };
  EXPECT_EQ(infer_output(base()).sizes, (Dims{1, 6, 3, 3}));
  expect([&](ConvolutionDesc& d) { d.input = f32({4, 5}); }, "it must have 3, 4 or 5");
  expect([&](ConvolutionDesc& d) { d.filter = f32({6, 2, 3}); }, "filter has 3 dimensions");
  expect([&](ConvolutionDesc& d) { d.filter.dtype = DataType::Float16; }, "filter has dtype float16", true);
  expect([&](ConvolutionDesc& d) { d.input.dtype = d.filter.dtype = DataType::Int32; }, "supports float16", true);
  expect([&](ConvolutionDesc& d) { d.group_count = 3; }, "does not divide");
  expect([&](ConvolutionDesc& d) { d.group_count = 0; }, "group_count is 0");
  expect([&](ConvolutionDesc& d) { d.filter = f32({5, 2, 3, 3}); }, "5 output channels");
  expect([&](ConvolutionDesc& d) { d.filter = f32({6, 4, 3, 3}); }, "filter sizes[1] is 4");
  expect([&](ConvolutionDesc& d) { d.bias = f32({1, 5, 1, 1}); }, "bias has sizes");
  expect([&](ConvolutionDesc& d) { d.strides = {1, 0}; }, "strides[1] is 0");
  expect([&](ConvolutionDesc& d) { d.dilations = {0, 1}; }, "dilations[0] is 0");
  expect([&](ConvolutionDesc& d) { d.dilations = {3, 1}; }, "larger than the padded input");
  expect([&](ConvolutionDesc& d) { d.output_padding = {0, 1}; }, "must be 0 in the forward direction");
  expect([&](ConvolutionDesc& d) { d.output = f32({1, 6, 3, 4}); }, "output has sizes");
  expect([&](ConvolutionDesc& d) { d.start_padding = {1}; }, "start_padding has 1 entries");
  expect([&](ConvolutionDesc& d) { d.direction = ConvolutionDirection::Backward; }, "filter sizes[0] is 6");
  expect([&](ConvolutionDesc& d) {
    d.direction = ConvolutionDirection::Backward;
    d.filter = f32({4, 3, 1, 1});
    d.input = f32({1, 4, 1, 1});
    d.start_padding = {1, 0};
  }, "nominal");
  expect([&](ConvolutionDesc& d) { d.fused_activation = FusedActivation{ActivationKind::Celu, {0.0f}}; }, "alpha != 0");
  EXPECT_THROW(parse_convolution_mode("correlation"), InvalidArgument);
  EXPECT_THROW(parse_convolution_direction("transposed"), InvalidArgument);
  // Backward accepts any output size >= 1.
  ConvolutionDesc d = base();
  d.direction = ConvolutionDirection::Backward;
  d.filter = f32({4, 3, 3, 3});
  d.output = f32({1, 6, 1, 40});
  EXPECT_EQ(infer_output(d).sizes, (Dims{1, 6, 1, 40}));
}

// Every size computed from the geometry is checked: (K - 1) * dilation + 1 of a broadcast filter
// of 2^24 + 1 taps and dilation 2^40 (each factor allowed, the product past int64) in both
// directions, and the backward direction's nominal output size (in - 1) * stride + extent.
TEST(Convolution, GeometryOverflowIsRefusedNamingTheField) {
  const auto f32 = [](Dims s) { return TensorDesc{DataType::Float32, s, std::nullopt}; };
  for (auto direction : {ConvolutionDirection::Forward, ConvolutionDirection::Backward}) {
    ConvolutionDesc d;
    d.direction = direction;
    d.input = f32({1, 1, 4, 4});
    d.filter = TensorDesc{DataType::Float32, {1, 1, (std::int64_t{1} << 24) + 1, 1}, Dims{0, 0, 0, 0}};
    d.dilations = {std::int64_t{1} << 40, 1};
    const std::string message = message_of<InvalidArgument>([&] { infer_output(d); });
    EXPECT_EQ(message, "Convolution: on spatial dimension 0 the window extent (filter size - 1) * dilation + 1 is "
                       "beyond 2^62") << message;
  }
  ConvolutionDesc d;
  d.direction = ConvolutionDirection::Backward;
  d.input = TensorDesc{DataType::Float32, {1, 1, std::int64_t{1} << 40}, Dims{0, 0, 0}};
  d.filter = f32({1, 1, 3});
  d.strides = {std::int64_t{1} << 40};
  const std::string message = message_of<InvalidArgument>([&] { infer_output(d); });
  EXPECT_NE(message.find("the nominal backward output size"), std::string::npos) << message;
  EXPECT_NE(message.find("beyond 2^62"), std::string::npos) << message;
  d.strides = {std::int64_t{1} << 19};  // 2^59 outputs, 2^61 bytes: fits (only described, never allocated)
  EXPECT_EQ(infer_output(d).sizes[2], ((std::int64_t{1} << 40) - 1) * (std::int64_t{1} << 19) + 3);
}

// Strides, dilations and paddings of 2^24 and more, whose padded planes would take gigabytes: the
// kernels run on a compact copy of what the output reads, and give the reference's values, on
// the outer axis, the last axis, both, depthwise, with one output and a long stride or dilation.
TEST(Convolution, HugeStridesAndDilationsMatchTheReference) {
  std::mt19937 rng(77);
  constexpr std::int64_t big = std::int64_t{1} << 24;
  struct Shape {
    Dims x, w, strides, dilations, start, end;
  };
  const Shape shapes[] = {
      {{1, 1, 4, 64}, {1, 1, 3, 3}, {big, 1}, {1, 1}, {big, 0}, {big, 0}},   // the issue's: 3 x 62
      {{1, 3, 64, 4}, {8, 3, 3, 3}, {1, big}, {1, 1}, {0, big}, {0, big}},   // on the last axis
      {{2, 2, 5, 7}, {4, 2, 2, 2}, {big, big}, {2, 3}, {big, 1}, {big, 2 * big}},
      {{1, 4, 3, 3}, {4, 1, 2, 2}, {big, 5}, {1, 1}, {1, 2}, {3 * big, 7}},    // depthwise (4 groups)
      {{1, 2, 9}, {3, 2, 2}, {big}, {4}, {big - 3}, {big}},
      {{1, 1, 1}, {1, 1, 2}, {std::int64_t{1} << 40}, {2}, {2}, {2}},         // one output, a long stride
      {{1, 1, 1}, {1, 1, 3}, {3}, {std::int64_t{1} << 31}, {std::int64_t{1} << 31}, {std::int64_t{1} << 31}},
      {{1, 2, 6, 5}, {2, 2, 3, 2}, {2, 1}, {big, 1}, {big, 0}, {big, 1}},      // dilated taps, overlapping rows
  };
  for (const Shape& s : shapes) {
    for (DataType dtype : {DataType::Float32, DataType::Float64, DataType::Float16}) {
      Case c;
      c.x_sizes = s.x;
      c.w_sizes = s.w;
      c.desc.strides = s.strides;
      c.desc.dilations = s.dilations;
      c.desc.start_padding = s.start;
      c.desc.end_padding = s.end;
      c.desc.group_count = s.x[1] / s.w[1];
      run_case(c, dtype, rng, std::string(name(dtype)) + " x " + std::to_string(s.x.size()));
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace dmlops

namespace dmlops {
namespace {

// A case of `algorithm` (forced): 2-D unless `spatial` says otherwise, cross-correlation.
Case algorithm_case(const std::string& algorithm, Dims x, Dims w, ConvolutionDirection direction, std::int64_t groups,
                    Dims strides, Dims dilations, Dims start, Dims end) {
  Case c;
  c.algorithm = algorithm;
  c.x_sizes = std::move(x);
  c.w_sizes = std::move(w);
  c.desc.direction = direction;
  c.desc.group_count = groups;
  c.desc.strides = std::move(strides);
  c.desc.dilations = std::move(dilations);
  c.desc.start_padding = std::move(start);
  c.desc.end_padding = std::move(end);
  return c;
}

// Every algorithm, forced over layers it applies to (strides, dilations, padding, groups, channel
// multipliers, tails of its vectors and tiles, 1-D and 3-D, both modes, channels-last), matches
// the reference and gives the same bits on 1, 2, 3 and 7 threads.
TEST(ConvolutionAlgorithms, EachForcedMatchesTheReferenceOnEveryThreadCount) {
  const auto F = ConvolutionDirection::Forward, B = ConvolutionDirection::Backward;
  std::vector<Case> cases = {
      algorithm_case("gemm", {2, 6, 9, 11}, {10, 3, 3, 2}, F, 2, {2, 1}, {1, 2}, {1, 0}, {0, 1}),
      algorithm_case("gemm", {1, 24, 8, 8}, {40, 24, 1, 1}, F, 1, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
      algorithm_case("gemm", {1, 3, 30}, {7, 3, 4}, F, 1, {3}, {1}, {2}, {2}),
      algorithm_case("direct", {2, 8, 10, 9}, {32, 8, 3, 3}, F, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("direct", {1, 6, 13, 7}, {40, 3, 2, 3}, F, 2, {2, 1}, {2, 1}, {0, 2}, {1, 0}),
      algorithm_case("direct", {1, 130, 5, 6}, {17, 130, 1, 1}, F, 1, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
      algorithm_case("direct", {1, 4, 5, 6, 7}, {16, 4, 2, 2, 3}, F, 1, {1, 1, 2}, {1, 1, 1}, {1, 0, 1}, {0, 1, 1}),
      // Passed over by the list (few input channels; fewer output channels than a vector), run when forced.
      algorithm_case("direct", {1, 24, 5, 6}, {20, 24, 1, 1}, F, 1, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
      algorithm_case("direct", {2, 5, 9, 8}, {6, 5, 3, 3}, F, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("depthwise_lanes", {2, 20, 11, 12}, {20, 1, 3, 3}, F, 20, {1, 2}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("depthwise_lanes", {1, 9, 40}, {18, 1, 5}, F, 9, {2}, {2}, {3}, {0}),
      algorithm_case("depthwise_lanes", {1, 3, 9, 10}, {3, 1, 3, 3}, F, 3, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("depthwise_rows", {1, 2, 9, 40}, {6, 1, 3, 3}, F, 2, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("depthwise_rows", {2, 20, 7, 9}, {20, 1, 2, 3}, F, 20, {2, 3}, {1, 2}, {0, 1}, {1, 0}),
      algorithm_case("backward_phases", {2, 8, 16, 16}, {8, 16, 4, 4}, B, 1, {2, 2}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("backward_phases", {2, 4, 20, 23}, {4, 18, 3, 5}, B, 2, {2, 3}, {1, 1}, {0, 2}, {1, 0}),
      algorithm_case("backward_scatter", {2, 6, 5, 7}, {6, 4, 3, 3}, B, 2, {2, 1}, {1, 2}, {1, 0}, {0, 0}),
      algorithm_case("backward_scatter", {2, 8, 16, 16}, {8, 16, 4, 4}, B, 1, {2, 2}, {1, 1}, {1, 1}, {1, 1}),
      // K <= 128 into contiguous planes: whole tiles written in place, the last micro-panel (63
      // positions) and the last partial panel (50 channels) staged.
      algorithm_case("gemm", {1, 24, 9, 7}, {48, 24, 1, 1}, F, 1, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
      algorithm_case("gemm", {2, 8, 10, 9}, {50, 8, 3, 3}, F, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
  };
  cases[4].desc.mode = ConvolutionMode::Convolution;
  cases[10].desc.mode = ConvolutionMode::Convolution;
  cases[15].desc.mode = ConvolutionMode::Convolution;
  cases[3].x_order = cases[3].out_order = {0, 2, 3, 1};  // channels-last
  cases[9].x_order = cases[9].out_order = {0, 2, 3, 1};
  cases[1].desc.fused_activation = make_activation("Test", "relu", {});
  std::set<std::string> reached;
  for (const Case& c : cases) {
    // backward_phases computes float32 only and direct float32 and float16.
    std::vector<DataType> dtypes{DataType::Float32};
    if (c.algorithm != "backward_phases") dtypes.push_back(DataType::Float16);
    if (c.algorithm != "backward_phases" && c.algorithm != "direct") dtypes.push_back(DataType::Float64);
    for (DataType dtype : dtypes) {
      std::vector<std::vector<std::byte>> results;
      for (int threads : {1, 2, 3, 7}) {
        ThreadCountGuard guard(threads);
        std::mt19937 rng(11);  // the same inputs for every thread count
        const std::string context = c.algorithm + " " + std::string(name(dtype)) + " x" + ::testing::PrintToString(c.x_sizes) +
                                    " on " + std::to_string(threads) + " threads";
        results.push_back(run_case(c, dtype, rng, context));
        if (HasFatalFailure()) return;
        EXPECT_EQ(results.back(), results.front()) << context;
      }
      reached.insert(c.algorithm);
    }
  }
  for (const std::string& algorithm : convolution_algorithms()) EXPECT_TRUE(reached.count(algorithm)) << algorithm;
}

ConvolutionDesc layer(DataType dtype, Dims x, Dims w, std::int64_t groups = 1, std::int64_t stride = 1,
                      std::int64_t pad = 0, ConvolutionDirection direction = ConvolutionDirection::Forward) {
  ConvolutionDesc d;
  d.input = TensorDesc{dtype, x, std::nullopt};
  d.filter = TensorDesc{dtype, w, std::nullopt};
  d.direction = direction;
  d.group_count = groups;
  const int D = x.size() - 2;
  d.strides = Dims::filled(D, stride);
  d.start_padding = d.end_padding = Dims::filled(D, pad);
  return d;
}

// The list's choice for representative layers, pinned: a refactor or a new algorithm that
// changes one of them fails here. (Every layer has at least 16 output channels per group, a
// vector of floats on AVX-512 and two on AVX2, or fewer than 8, so the choice is the same with
// either.)
TEST(ConvolutionAlgorithms, TheListsChoiceForRepresentativeLayers) {
  const auto f32 = DataType::Float32, f16 = DataType::Float16, f64 = DataType::Float64;
  const auto B = ConvolutionDirection::Backward;
  struct Pinned {
    const char* what;
    ConvolutionDesc desc;
    const char* algorithm;
    const char* rewrite;
  };
  ConvolutionDesc compact = layer(f32, {1, 16, 40}, {32, 16, 3}, 1, 3, 100000);
  compact.dilations = {100000};
  const Pinned pinned[] = {
      {"ResNet 3x3 64@56", layer(f32, {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1), "direct", ""},
      {"ResNet 3x3 512@7 float16", layer(f16, {1, 512, 7, 7}, {512, 512, 3, 3}, 1, 1, 1), "direct", ""},
      {"ResNet 1x1 1024>256@14", layer(f32, {1, 1024, 14, 14}, {256, 1024, 1, 1}), "direct", ""},
      {"ResNet 1x1 64>256@56", layer(f32, {1, 64, 56, 56}, {256, 64, 1, 1}), "gemm", ""},
      {"ResNet 1x1 512>1024 stride 2", layer(f32, {1, 512, 28, 28}, {1024, 512, 1, 1}, 1, 2), "direct", "sampled"},
      {"1x1 64>256 stride 2", layer(f32, {1, 64, 28, 28}, {256, 64, 1, 1}, 1, 2), "gemm", "sampled"},
      {"3x3 float64", layer(f64, {1, 64, 28, 28}, {64, 64, 3, 3}, 1, 1, 1), "gemm", ""},
      {"depthwise 3x3 32@112", layer(f32, {1, 32, 112, 112}, {32, 1, 3, 3}, 32, 1, 1), "depthwise_lanes", ""},
      {"depthwise 3x3 stride 2", layer(f32, {1, 144, 56, 56}, {144, 1, 3, 3}, 144, 2, 1), "depthwise_lanes", ""},
      {"one channel, 16 outputs", layer(f32, {1, 1, 64, 64}, {16, 1, 3, 3}, 1, 1, 1), "depthwise_rows", ""},
      {"grouped 3x3 32 groups", layer(f32, {1, 256, 28, 28}, {512, 8, 3, 3}, 32, 1, 1), "direct", ""},
      {"grouped 3x3 4 out per group", layer(f32, {1, 64, 28, 28}, {64, 4, 3, 3}, 16, 1, 1), "gemm", ""},
      {"strided 3x3", layer(f32, {1, 128, 56, 56}, {128, 128, 3, 3}, 1, 2, 1), "direct", ""},
      {"backward 4x4 stride 2 64@28", layer(f32, {1, 64, 28, 28}, {64, 32, 4, 4}, 1, 2, 1, B), "backward_phases", ""},
      {"backward 2x2 stride 2", layer(f32, {1, 64, 28, 28}, {64, 32, 2, 2}, 1, 2, 0, B), "backward_scatter", ""},
      {"backward float16", layer(f16, {1, 64, 28, 28}, {64, 32, 4, 4}, 1, 2, 1, B), "backward_scatter", ""},
      {"huge dilation", compact, "direct", "compact"},
  };
  for (const Pinned& p : pinned) {
    const ConvolutionPlan plan = plan_convolution(p.desc);
    EXPECT_EQ(plan.algorithm, p.algorithm) << p.what << ": " << plan.reason;
    EXPECT_EQ(plan.rewrite, p.rewrite) << p.what;
  }
}

// 1x1 128>512@28: the GEMM, whose sums go straight into the output, on up to 4 threads; direct,
// which splits its filter over more tasks, above.
TEST(ConvolutionAlgorithms, A128ChannelPointwiseLayerRunsGemmOnFewThreadsOnly) {
  const ConvolutionDesc desc = layer(DataType::Float32, {1, 128, 28, 28}, {512, 128, 1, 1});
  const int previous = set_local_num_threads(1);
  EXPECT_EQ(plan_convolution(desc).algorithm, "gemm");
  set_local_num_threads(4);
  EXPECT_EQ(plan_convolution(desc).algorithm, "gemm");
  set_local_num_threads(5);
  EXPECT_EQ(plan_convolution(desc).algorithm, "direct");
  set_local_num_threads(16);
  EXPECT_EQ(plan_convolution(desc).algorithm, "direct");
  set_local_num_threads(previous);
}

// 1x1 layers whose output channels fill one block of the direct tiles (direct_vectors() vectors),
// with 64 input channels: direct on several threads, the GEMM on one; with 32 input channels, a
// half block or two blocks, the GEMM on any.
TEST(ConvolutionAlgorithms, APointwiseLayerOfOneBlockOfOutputChannelsRunsDirectOnSeveralThreads) {
  const std::int64_t block = direct_vectors() * simd_lanes<float>();
  const auto pointwise = [](std::int64_t in, std::int64_t out) {
    return layer(DataType::Float32, {1, in, 40, 40}, {out, in, 1, 1});
  };
  const int previous = set_local_num_threads(1);
  EXPECT_EQ(plan_convolution(pointwise(64, block)).algorithm, "gemm");
  set_local_num_threads(2);
  EXPECT_EQ(plan_convolution(pointwise(64, block)).algorithm, "direct");
  EXPECT_EQ(plan_convolution(pointwise(96, block - simd_lanes<float>() + 1)).algorithm, "direct");
  EXPECT_EQ(plan_convolution(pointwise(32, block)).algorithm, "gemm");
  EXPECT_EQ(plan_convolution(pointwise(64, block / 2)).algorithm, "gemm");
  EXPECT_EQ(plan_convolution(pointwise(64, 2 * block)).algorithm, "gemm");
  set_local_num_threads(previous);
}

TEST(ConvolutionAlgorithms, ForcingOneThatDoesNotApplyIsRefusedSayingWhy) {
  const ConvolutionDesc f64 = layer(DataType::Float64, {1, 8, 9, 9}, {16, 8, 3, 3});
  std::string message = testing::message_of<InvalidArgument>([&] { plan_convolution(f64, "direct"); });
  EXPECT_NE(message.find("'direct' does not apply"), std::string::npos) << message;
  EXPECT_NE(message.find("float32 and float16"), std::string::npos) << message;
  message = testing::message_of<InvalidArgument>([&] { plan_convolution(f64, "depthwise_lanes"); });
  EXPECT_NE(message.find("not depthwise"), std::string::npos) << message;
  message = testing::message_of<InvalidArgument>([&] { plan_convolution(f64, "backward_scatter"); });
  EXPECT_NE(message.find("a backward algorithm"), std::string::npos) << message;
  message = testing::message_of<InvalidArgument>([&] { plan_convolution(f64, "winograd"); });
  EXPECT_NE(message.find("'winograd' is unknown; expected one of depthwise_lanes"), std::string::npos) << message;
  // execute refuses before writing anything.
  Tensor x(DataType::Float64, {1, 8, 9, 9}), w(DataType::Float64, {16, 8, 3, 3}), y(DataType::Float64, {1, 16, 7, 7});
  y.for_each([&](const Dims& i) { y.set(i, 7.0); });
  const std::vector<std::byte> before = y.bytes;
  TensorView xv = x.view(), wv = w.view(), yv = y.view();
  message = testing::message_of<InvalidArgument>([&] { execute(f64, xv, wv, nullptr, yv, "backward_phases"); });
  EXPECT_NE(message.find("backward_phases"), std::string::npos) << message;
  EXPECT_EQ(y.bytes, before);
}

TEST(ConvolutionAlgorithms, ThePlanNamesTheAlgorithmItsTilesAndThreads) {
  ThreadCountGuard guard(3);
  const ConvolutionPlan plan = plan_convolution(layer(DataType::Float32, {2, 32, 20, 20}, {256, 32, 1, 1}));
  EXPECT_EQ(plan.algorithm, "gemm");
  EXPECT_EQ(plan.threads, 3);
  EXPECT_EQ(plan.isa, kernel_isa(KernelKind::Fma));
  EXPECT_FALSE(plan.reason.empty());
  std::map<std::string, std::int64_t> tiles(plan.tiles.begin(), plan.tiles.end());
  EXPECT_EQ(tiles.at("MR"), 6);
  EXPECT_EQ(tiles.at("K"), 32);
  EXPECT_GE(plan.tasks, 2);
  const ConvolutionPlan forced = plan_convolution(layer(DataType::Float32, {2, 32, 20, 20}, {48, 32, 3, 3}), "gemm");
  EXPECT_EQ(forced.algorithm, "gemm");
  EXPECT_EQ(forced.reason.rfind("forced (", 0), 0u) << forced.reason;
  const ConvolutionPlan phases = plan_convolution(
      layer(DataType::Float32, {1, 64, 28, 28}, {64, 32, 4, 4}, 1, 2, 1, ConvolutionDirection::Backward));
  EXPECT_EQ(phases.reason, "4 phases, each a forward layer; the first phase runs direct");
}

// A case prepared (its filter copied, and packed for gemm and direct) against execute() on the
// same random input and filter, bit for bit, on each thread count.
void expect_prepared_bits(const Case& c, DataType dtype, std::mt19937& rng, std::initializer_list<int> thread_counts) {
  Tensor x(dtype, c.x_sizes), w(dtype, c.w_sizes);
  fill_random(x, rng);
  fill_random(w, rng);
  ConvolutionDesc d = c.desc;
  d.input = x.desc();
  d.filter = w.desc();
  TensorView xv = x.view(), wv = w.view();
  const PreparedConvolution prepared(d, wv, nullptr, c.algorithm);
  EXPECT_EQ(prepared.packed(), c.algorithm == "gemm" || c.algorithm == "direct") << c.algorithm;
  for (int threads : thread_counts) {
    ThreadCountGuard guard(threads);
    Tensor expected(dtype, infer_output(d).sizes), got(dtype, infer_output(d).sizes);
    TensorView ev = expected.view(), gv = got.view();
    execute(d, xv, wv, nullptr, ev, c.algorithm);
    prepared(xv, gv);
    EXPECT_EQ(got.bytes, expected.bytes) << c.algorithm << " " << name(dtype) << " " << threads << " threads";
  }
}

// A prepared convolution (filter packed once for gemm and direct) gives execute()'s bits, on
// any thread count, for every algorithm.
TEST(ConvolutionAlgorithms, PreparedGivesExecutesBits) {
  std::mt19937 rng(3);
  const auto F = ConvolutionDirection::Forward, B = ConvolutionDirection::Backward;
  const Case cases[] = {
      algorithm_case("gemm", {2, 6, 9, 11}, {10, 3, 3, 2}, F, 2, {2, 1}, {1, 2}, {1, 0}, {0, 1}),
      // One position block and 512 output channels: unprepared, A is packed inside the product.
      algorithm_case("gemm", {1, 64, 7, 7}, {512, 64, 1, 1}, F, 1, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
      algorithm_case("direct", {1, 64, 7, 7}, {64, 64, 3, 3}, F, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("direct", {3, 8, 10, 9}, {32, 8, 3, 3}, F, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("", {1, 20, 11, 12}, {20, 1, 3, 3}, F, 20, {1, 2}, {1, 1}, {1, 1}, {1, 1}),
      algorithm_case("", {1, 8, 16, 16}, {8, 16, 4, 4}, B, 1, {2, 2}, {1, 1}, {1, 1}, {1, 1}),
  };
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::Float32, DataType::Float16}) expect_prepared_bits(c, dtype, rng, {1, 2, 7});
  }
}

// How much packed filter a direct pass holds, from what the CPU reports: half of L2 where
// AVX-512 runs at one FMA per cycle (Zen 4), and for windows of up to 3 rows where AMD's L2 feeds
// the AVX-512 tiles (Zen 5); else half an L1 (3x3x3 windows on Zen 5, and Intel's and the AVX2
// kernels). A layer of many input channels shows the most channels a pass takes.
TEST(ConvolutionAlgorithms, DirectPassesFollowTheCachesAndTheCpu) {
  const auto pass_of = [](Dims x, Dims w) {
    ThreadCountGuard one(1);
    const ConvolutionPlan plan = plan_convolution(layer(DataType::Float32, x, w, 1, 1, w.back() / 2), "direct");
    return std::map<std::string, std::int64_t>(plan.tiles.begin(), plan.tiles.end()).at("channel_pass");
  };
  const platform::CacheSizes& caches = platform::cache_sizes();
  const platform::CpuFeatures& cpu = platform::cpu_features();
  const std::int64_t width = direct_vectors() * simd_lanes<float>() * std::int64_t{sizeof(float)};
  const bool half_rate = vector_fmas_per_cycle() == 1, l2_fed = avx512_enabled() && cpu.avx512_l2_fed;
  // Passes of near-equal size, at most `most` channels each. (Inputs larger than the filter, so
  // that the layer takes blocks of direct_vectors() vectors.)
  const std::int64_t channels = 1024;
  const auto passes_of = [](std::int64_t most, std::int64_t channels) {
    most = std::clamp<std::int64_t>(most, 1, channels);
    return (channels + (channels + most - 1) / most - 1) / ((channels + most - 1) / most);
  };
  const std::int64_t planar = (half_rate || l2_fed ? caches.l2 : caches.l1d) / 2 / (9 * width);
  const std::int64_t cubic = (half_rate ? caches.l2 : caches.l1d) / 2 / (27 * width);
  EXPECT_EQ(pass_of({1, channels, 64, 64}, {64, channels, 3, 3}), passes_of(planar, channels));
  EXPECT_EQ(pass_of({1, channels, 16, 16, 16}, {64, channels, 3, 3, 3}), passes_of(cubic, channels));
  // Pointwise, 64 positions (one band): with AMD's L2, the filter and the band's input of each
  // channel in three quarters of it; else as the windows, or the filter and two input lines per
  // channel in three eighths of L1.
  const std::int64_t pointwise = half_rate ? caches.l2 / 2 / width
                                 : l2_fed  ? caches.l2 / 4 * 3 / (width + 64 * std::int64_t{sizeof(float)})
                                           : caches.l1d * 3 / 8 / (width + 128);
  EXPECT_EQ(pass_of({1, 4 * channels, 8, 8}, {64, 4 * channels, 1, 1}), passes_of(pointwise, 4 * channels));
}

// A filter that a direct task packs as it goes, a pass at a time: input channels over three
// passes of near-equal size (the last one shorter), against the reference on 1 and 2 threads,
// and the prepared call (its filter packed once, whole) giving the same bits.
TEST(ConvolutionAlgorithms, DirectPacksItsFilterAPassAtATime) {
  const auto tiles_of = [](std::int64_t channels) {
    ThreadCountGuard one(1);
    const ConvolutionPlan plan = plan_convolution(layer(DataType::Float32, {1, channels, 5, 5}, {64, channels, 3, 3}, 1, 1, 1), "direct");
    return std::map<std::string, std::int64_t>(plan.tiles.begin(), plan.tiles.end());
  };
  const std::int64_t most = tiles_of(std::int64_t{1} << 20).at("channel_pass");  // (passes that many apart)
  const std::int64_t channels = 2 * most + 1 + ((2 * most + 1) % 3 == 0 ? 1 : 0);  // not a multiple of 3
  const auto tiles = tiles_of(channels);
  ASSERT_EQ(tiles.at("packed_per_pass"), 1);
  const std::int64_t pass = tiles.at("channel_pass");
  ASSERT_LE(pass, most);
  ASSERT_EQ((channels + pass - 1) / pass, 3);
  ASSERT_NE(channels % pass, 0);
  const Case c = algorithm_case("direct", {1, channels, 5, 5}, {64, channels, 3, 3}, ConvolutionDirection::Forward, 1,
                                {1, 1}, {1, 1}, {1, 1}, {1, 1});
  std::vector<std::vector<std::byte>> results;
  for (int threads : {1, 2}) {
    ThreadCountGuard guard(threads);
    std::mt19937 rng(5);
    results.push_back(run_case(c, DataType::Float32, rng, std::to_string(channels) + " channels on " + std::to_string(threads) + " threads"));
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(results.back(), results.front());
  std::mt19937 rng(6);
  expect_prepared_bits(c, DataType::Float32, rng, {1, 2});
}

}  // namespace
}  // namespace dmlops
