// Convolution kernels. Both directions are products over the input's padded planes:
//
// FORWARD, per (n, group) and per block of output positions, the sums
//   y[oc'][p] = sum over ic', t of W[oc', ic', t] * x[n, g*ICg + ic', position read by tap t of p]
// in increasing (ic', t), then the bias, the activation and the store into the strided output.
// Float sums with at least a vector of output channels per group run direct (core/direct.hpp:
// output channels in the vector lanes, every input value broadcast from the padded planes, no
// im2col copy); the rest (float64, few output channels, pointwise layers with few input
// channels) packs the im2col panel
//   B[ic' * taps + t][p] = x[n, g*ICg + ic', position read by tap t of output position p]
// (pieces of rows of the padded planes, or the input itself when it needs no padding) and
// multiplies it by the packed filter A[oc'][ic' * taps + t] (core/gemm.hpp). Both chains are the
// same FMAs in the same order, so the same bits. Tasks are (n, group, position block,
// output-channel block): disjoint outputs, whole reductions. With one input channel per group
// (depthwise) a weighted sum of shifted rows replaces the product.
//
// BACKWARD is the adjoint, done without multiplying zeros: per (n, group, block of output
// channels), C[oc' * taps + t][i] = sum_ic W[ic, oc', t'] * x[n, ic, i] is one GEMM over the
// input positions i, then a col2im scatter adds C[oc' * taps + t][i] into output position
// i*stride + t*dil - start, as fold does: into planes with margins wide enough for every tap
// (cut off when the output is stored), or, when those margins would be large, into the output
// planes with the taps that fall outside dropped. A task owns its output
// channels' whole planes (an accumulator in the accumulation type), so no two threads write
// the same element, and the sums run in a fixed order (input blocks, then taps). The
// alternative, a forward convolution over a zero-inserted input, would multiply stride^D
// times more zeros than values and needs the output padding spelled out as extra zeros.
// Larger undilated float32 layers instead run as stride^D forward convolutions, one per output
// phase (the outputs q, q + stride, ...), each over the taps that reach it: no zeros, no
// scatter (see "BACKWARD of an undilated layer as stride^D forward convolutions" below).
#include "dmlops/ops/convolution.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dmlops/core/checked.hpp"
#include "dmlops/core/cpu.hpp"
#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/gemm.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/direct.hpp"
#include "dmlops/core/lanes.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/rows.hpp"
#include "dmlops/core/scratch.hpp"
#include "dmlops/core/window.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops {
namespace {

constexpr const char* kOp = "Convolution";
constexpr std::string_view kModeNames[] = {"convolution", "cross_correlation"};
constexpr std::string_view kDirectionNames[] = {"forward", "backward"};
constexpr std::int64_t kPanelBytes = 768 * 1024;   // a forward im2col panel: with A's K block, about L2
constexpr std::int64_t kBackwardPanelBytes = 256 * 1024;  // a backward input panel stays in L2
constexpr std::int64_t kMinBlock = 128;          // forward positions per task, at least
constexpr std::int64_t kMinChannelBlock = 48;    // output channels per forward task, at least
constexpr std::int64_t kPlaneBytes = 1024 * 1024;  // a backward task's accumulator planes
constexpr std::int64_t kMarginSlack = 4096;  // a backward padded plane may exceed twice the output by this
constexpr std::int64_t kSharedPanelBytes = 16 << 20;  // backward input panels packed up front, at most
constexpr std::int64_t kMinTaskFlops = 1 << 17;    // below this a task is not worth a thread
constexpr std::int64_t kChannelBlock = 16;  // channels-last input channels padded together
constexpr std::int64_t kLongRow = 32;  // depthwise output rows this long are stored one by one, not moved first
constexpr std::int64_t kSlabBytes = 64 * 1024;  // a depthwise task's interleaved input slab: stays in L2
constexpr std::int64_t kLaneChunkBytes = 16 * 1024;  // depthwise results computed at once: stay in L1
constexpr std::int64_t kDirectFilterBytes = 32 * 1024;   // a direct pass's packed filter: stays in L1
constexpr std::int64_t kDirectBandBytes = 128 * 1024;    // a direct task's sums: stay in L2
constexpr std::int64_t kDirectMinBand = 24;             // positions: four 6-position tiles
constexpr std::int64_t kDirectPointwiseChannels = 128;   // input channels a 1x1 layer needs to run direct
constexpr std::int64_t kDirectPackColumns = 64;          // filter columns packed per task
constexpr std::int64_t kCacheLine = 64;                  // bytes

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }


Dims spatial(const Dims& sizes) { return Dims(sizes.begin() + 2, sizes.end()); }

template <class T>
struct AccumulatorOf {
  using type = T;
};
template <>
struct AccumulatorOf<Half> {
  using type = float;
};

// ---------------------------------------------------------------------------------------------
// Validation

// One of the five per-dimension arrays: D entries (or none: the default), each >= minimum.
Dims axis_array(const Dims& values, const char* field, int D, std::int64_t fallback, std::int64_t minimum) {
  if (values.empty()) return Dims::filled(D, fallback);
  if (values.size() != D)
    fail(kOp, ": ", field, " has ", values.size(), " entries but there are ", D, " spatial dimensions");
  for (int a = 0; a < D; ++a) {
    if (values[a] < minimum) fail(kOp, ": ", field, "[", a, "] is ", values[a], "; it must be >= ", minimum);
    if (values[a] > (std::int64_t{1} << 40)) fail(kOp, ": ", field, "[", a, "] is ", values[a], "; too large");
  }
  return values;
}

// Everything execute() needs, derived once from a validated descriptor.
struct Geometry {
  int D = 0;
  std::int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  std::int64_t in_per_group = 0, out_per_group = 0;
  Dims in_spatial, out_spatial, kernel, extent;  // extent: (kernel - 1) * dilation + 1
  Dims strides, dilations, start, end, output_padding;
  TensorDesc output;
};

Geometry analyse(const ConvolutionDesc& desc) {
  validate_tensor_desc(desc.input, "Convolution: input");
  validate_tensor_desc(desc.filter, "Convolution: filter");
  const DataType dtype = desc.input.dtype;
  if (!is_floating(dtype))
    fail<DTypeError>(kOp, ": input has dtype ", name(dtype), "; convolution supports float16, float32 and float64");
  const int rank = desc.input.sizes.size();
  if (rank < 3 || rank > 5)
    fail(kOp, ": input has ", rank, " dimensions; it must have 3, 4 or 5: (N, C, spatial...) with 1 to 3 spatial "
         "dimensions");
  const auto same_kind = [&](const TensorDesc& t, const char* what) {
    if (t.dtype != dtype)
      fail<DTypeError>(kOp, ": ", what, " has dtype ", name(t.dtype), " but the input is ", name(dtype));
    if (t.sizes.size() != rank)
      fail(kOp, ": ", what, " has ", t.sizes.size(), " dimensions but the input has ", rank);
  };
  same_kind(desc.filter, "filter");
  if (desc.bias) {
    validate_tensor_desc(*desc.bias, "Convolution: bias");
    same_kind(*desc.bias, "bias");
  }
  if (desc.output) {
    validate_tensor_desc(*desc.output, "Convolution: output");
    same_kind(*desc.output, "output");
  }
  if (static_cast<std::size_t>(desc.mode) >= std::size(kModeNames))
    fail(kOp, ": mode has the unknown value ", static_cast<int>(desc.mode));
  if (static_cast<std::size_t>(desc.direction) >= std::size(kDirectionNames))
    fail(kOp, ": direction has the unknown value ", static_cast<int>(desc.direction));

  Geometry g;
  g.D = rank - 2;
  g.strides = axis_array(desc.strides, "strides", g.D, 1, 1);
  g.dilations = axis_array(desc.dilations, "dilations", g.D, 1, 1);
  g.start = axis_array(desc.start_padding, "start_padding", g.D, 0, 0);
  g.end = axis_array(desc.end_padding, "end_padding", g.D, 0, 0);
  g.output_padding = axis_array(desc.output_padding, "output_padding", g.D, 0, 0);
  g.groups = desc.group_count;
  if (g.groups < 1) fail(kOp, ": group_count is ", g.groups, "; it must be >= 1");
  g.batch = desc.input.sizes[0];
  g.in_channels = desc.input.sizes[1];
  g.in_spatial = spatial(desc.input.sizes);
  g.kernel = spatial(desc.filter.sizes);
  if (g.in_channels % g.groups != 0)
    fail(kOp, ": the input has ", g.in_channels, " channels, which group_count ", g.groups, " does not divide");
  g.in_per_group = g.in_channels / g.groups;
  const bool forward = desc.direction == ConvolutionDirection::Forward;
  if (forward) {
    if (desc.filter.sizes[1] != g.in_per_group)
      fail(kOp, ": filter sizes[1] is ", desc.filter.sizes[1], " but a forward filter has input channels / group_count = ",
           g.in_channels, " / ", g.groups, " = ", g.in_per_group, " there: (OutC, InC/G, K...)");
    g.out_channels = desc.filter.sizes[0];
    if (g.out_channels % g.groups != 0)
      fail(kOp, ": the filter has ", g.out_channels, " output channels (sizes[0]), which group_count ", g.groups,
           " does not divide");
    for (int a = 0; a < g.D; ++a) {
      if (g.output_padding[a] != 0)
        fail(kOp, ": output_padding[", a, "] is ", g.output_padding[a], "; it must be 0 in the forward direction");
    }
    const std::vector<WindowAxis> axes =
        window_axes(kOp, "filter size", g.in_spatial, WindowParams{g.kernel, g.strides, g.dilations, g.start, g.end});
    for (const WindowAxis& axis : axes) {
      g.out_spatial.push_back(axis.out());
      g.extent.push_back(axis.extent());
    }
  } else {
    if (desc.filter.sizes[0] != g.in_channels)
      fail(kOp, ": filter sizes[0] is ", desc.filter.sizes[0], " but a backward filter has one entry per input channel (",
           g.in_channels, ") there: (InC, OutC/G, K...)");
    g.out_channels = checked_mul(desc.filter.sizes[1], g.groups, kOp, ": the output channel count (filter sizes[1] * group_count)");
    for (int a = 0; a < g.D; ++a) {
      // (in - 1) * stride + extent - start - end + output_padding; the backward walker computes
      // (in - 1) * stride + extent - start as well, so the whole sum is checked term by term.
      g.extent.push_back(checked_extent(g.kernel[a], g.dilations[a], kOp, ": on spatial dimension ", a,
                                        " the window extent (filter size - 1) * dilation + 1"));
      std::int64_t nominal = checked_mul(g.in_spatial[a] - 1, g.strides[a], kOp, ": on spatial dimension ", a,
                                         " the nominal backward output size ((input - 1) * stride)");
      nominal = checked_add(nominal, g.extent[a], kOp, ": on spatial dimension ", a,
                            " the nominal backward output size ((input - 1) * stride + extent)");
      nominal = checked_add(nominal, g.output_padding[a] - g.start[a] - g.end[a], kOp, ": on spatial dimension ", a,
                            " the nominal backward output size");
      if (desc.output) {
        g.out_spatial.push_back(desc.output->sizes[2 + a]);
      } else {
        if (nominal < 1)
          fail(kOp, ": the nominal backward output size on spatial dimension ", a, " is ", nominal,
               " (paddings larger than the transposed window); give the output sizes");
        g.out_spatial.push_back(nominal);
      }
    }
  }
  g.out_per_group = g.out_channels / g.groups;
  g.output = TensorDesc{dtype, {g.batch, g.out_channels}, std::nullopt};
  for (std::int64_t s : g.out_spatial) g.output.sizes.push_back(s);
  std::int64_t elements = checked_mul(g.batch, g.out_channels, kOp, ": the output's element count");
  for (std::int64_t s : g.out_spatial) elements = checked_mul(elements, s, kOp, ": the output's element count");
  validate_tensor_desc(g.output, "Convolution: output");
  if (desc.bias) {
    Dims expected = Dims::filled(rank, 1);
    expected[1] = g.out_channels;
    if (desc.bias->sizes != expected)
      fail(kOp, ": bias has sizes ", desc.bias->sizes, " but it must be ", expected, ": (1, OutC, 1...)");
  }
  if (desc.output) {
    if (forward && desc.output->sizes != g.output.sizes)
      fail(kOp, ": output has sizes ", desc.output->sizes, " but the convolution gives ", g.output.sizes);
    if (!forward && (desc.output->sizes[0] != g.batch || desc.output->sizes[1] != g.out_channels))
      fail(kOp, ": output has sizes ", desc.output->sizes, " but a backward convolution gives (", g.batch, ", ",
           g.out_channels, ", ...) (filter sizes[1] * group_count output channels)");
    g.output = *desc.output;
  }
  if (desc.fused_activation) validate_activation(kOp, *desc.fused_activation);
  return g;
}

// ---------------------------------------------------------------------------------------------
// Element access: strided rows of T <-> contiguous rows of the accumulation type.

template <class T, class Acc>
Acc load_value(const std::byte* p) {
  if constexpr (std::is_same_v<T, Half>) {
    return half_bits_to_float(load<std::uint16_t>(p));
  } else {
    return static_cast<Acc>(load<T>(p));
  }
}

bool aligned(const void* p, std::size_t alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

template <class T, class Acc>
void load_run(const std::byte* src, std::int64_t step, std::int64_t n, Acc* dst) {
  if constexpr (std::is_same_v<T, Half>) {
    if (step == sizeof(Half) && aligned(src, alignof(Half)))
      return half_to_float(reinterpret_cast<const Half*>(src), dst, static_cast<std::size_t>(n));
  } else {
    if (step == sizeof(T)) {  // T is Acc: whole input rows, one memcpy
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
      return;
    }
    if (step == 2 * sizeof(T) && aligned(src, alignof(T))) {  // every other value (a strided 1x1 layer's samples)
      const T* values = reinterpret_cast<const T*>(src);
      for (std::int64_t j = 0; j < n; ++j) dst[j] = values[2 * j];  // typed: vectorised as a deinterleave
      return;
    }
  }
  for (std::int64_t j = 0; j < n; ++j) dst[j] = load_value<T, Acc>(src + j * step);
}

template <class T, class Acc>
void store_run(const Acc* src, std::int64_t n, std::byte* dst, std::int64_t step) {
  if constexpr (std::is_same_v<T, Half>) {
    if (step == sizeof(Half) && aligned(dst, alignof(Half)))
      return float_to_half(src, reinterpret_cast<Half*>(dst), static_cast<std::size_t>(n));
    for (std::int64_t j = 0; j < n; ++j) {
      const std::uint16_t bits = float_to_half_bits(src[j]);
      std::memcpy(dst + j * step, &bits, sizeof bits);
    }
  } else {
    if (step == sizeof(T)) {
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
      return;
    }
    for (std::int64_t j = 0; j < n; ++j) std::memcpy(dst + j * step, src + j, sizeof(T));
  }
}

// Positions [p0, p0 + count) of a spatial plane (row-major over `sizes`, byte strides `strides`)
// as runs along the last axis: fn(byte offset, first index in the range, run length).
template <class Fn>
void for_each_run(const Dims& sizes, const Dims& strides, std::int64_t p0, std::int64_t count, Fn&& fn) {
  const int D = sizes.size();
  bool dense = true;  // one run for the whole plane
  for (int a = 0; a + 1 < D; ++a) dense = dense && strides[a] == strides[a + 1] * sizes[a + 1];
  if (dense) return fn(p0 * strides[D - 1], 0, count);
  Dims index = Dims::filled(D, 0);
  for (int a = D - 1; a >= 0; --a) {
    index[a] = p0 % sizes[a];
    p0 /= sizes[a];
  }
  std::int64_t done = 0;
  while (done < count) {
    const std::int64_t run = std::min(count - done, sizes[D - 1] - index[D - 1]);
    std::int64_t offset = 0;
    for (int a = 0; a < D; ++a) offset += index[a] * strides[a];
    fn(offset, done, run);
    done += run;
    index[D - 1] += run;
    for (int a = D - 1; a > 0 && index[a] == sizes[a]; --a) {
      index[a] = 0;
      ++index[a - 1];
    }
  }
}

// Bias, activation, rounding and store of one output channel's results for positions
// [p0, p0 + count) (destroys `row`).
template <class T, class Acc>
void finish_row(Acc* row, std::int64_t count, Acc bias, const std::optional<FusedActivation>& activation,
                std::byte* plane, const Dims& out_spatial, const Dims& out_strides, std::int64_t p0) {
  if (bias != Acc(0)) {
    for (std::int64_t j = 0; j < count; ++j) row[j] += bias;
  }
  if (activation) apply_activation(*activation, row, count);
  for_each_run(out_spatial, out_strides, p0, count, [&](std::int64_t offset, std::int64_t first, std::int64_t n) {
    store_run<T, Acc>(row + first, n, plane + offset, out_strides[out_strides.size() - 1]);
  });
}

// A tensor of Acc whose strides are whole elements: read and written in place.
template <class Acc>
bool elements_of(const TensorView& t) {
  bool ok = aligned(t.data, alignof(Acc));
  for (std::int64_t s : t.byte_strides) ok = ok && s % std::int64_t{sizeof(Acc)} == 0;
  return ok;
}

// Stores results interleaved by output channel: channel o < used of positions [p0, p0 + count)
// is result[x * stride + o], the bias and activation applied already. `planes` is the first
// channel's output plane, channel_step bytes before the next. An output of Acc with whole-element
// strides (direct_out) gets them L channels at a time in place; any other through `staging`
// (L * count values) and finish_row's conversion.
template <class T, class Acc>
void store_lanes(const Acc* result, std::int64_t stride, std::int64_t count, std::int64_t used, std::byte* planes,
                 std::int64_t channel_step, const Geometry& g, const Dims& out_strides, std::int64_t p0, bool direct_out,
                 Acc* staging) {
  constexpr std::int64_t kAcc = sizeof(Acc);
  const std::int64_t L = lane_count<Acc>(), last = g.D - 1;
  for (std::int64_t o = 0; o < used; o += L) {
    const std::int64_t lanes = std::min(L, used - o);
    std::byte* first = planes + o * channel_step;
    if (direct_out) {
      for_each_run(g.out_spatial, out_strides, p0, count, [&](std::int64_t offset, std::int64_t at, std::int64_t run) {
        deinterleave_lanes(result + at * stride + o, stride, run, lanes, reinterpret_cast<Acc*>(first + offset),
                           channel_step / kAcc, out_strides[last] / kAcc);
      });
      continue;
    }
    deinterleave_lanes(result + o, stride, count, lanes, staging, count, 1);
    for (std::int64_t l = 0; l < lanes; ++l)
      finish_row<T, Acc>(staging + l * count, count, Acc(0), std::nullopt, first + l * channel_step, g.out_spatial,
                         out_strides, p0);
  }
}

// Zero-filled scratch (for buffers whose untouched entries must read as zeros).
template <class Acc>
std::vector<Acc> scratch(std::int64_t n) {
  return std::vector<Acc>(static_cast<std::size_t>(n));
}

// Every window tap's multi-index and the byte offset of that tap within one filter plane.
struct Taps {
  std::vector<Dims> index;
  std::vector<std::int64_t> filter_offset;

  Taps(const BlockWalker& walker, const TensorView& filter) {
    for (std::int64_t t = 0; t < walker.tap_count(); ++t) {
      index.push_back(walker.tap(t));
      std::int64_t offset = 0;
      for (int a = 0; a < walker.rank(); ++a) offset += index.back()[a] * filter.byte_strides[2 + a];
      filter_offset.push_back(offset);
    }
  }
  // The filter tap that multiplies window tap t: flipping every axis reverses the row-major index.
  std::int64_t filter(std::int64_t t, bool flip) const {
    return filter_offset[static_cast<std::size_t>(flip ? std::ssize(filter_offset) - 1 - t : t)];
  }
};

struct Views {
  const TensorView& in;
  const TensorView& filter;
  const TensorView* bias;
  const TensorView& out;
};

// Output channel oc's bias ({1, OutC, 1...}), 0 without one.
template <class T, class Acc>
Acc bias_of(const TensorView* bias, std::int64_t oc) {
  if (!bias) return Acc(0);
  return load_value<T, Acc>(static_cast<const std::byte*>(bias->data) + oc * bias->byte_strides[1]);
}

// The filter as a view of Acc values: the filter itself, or for float16 a dense float copy
// widened once per call, in bulk (F16C), from any strides. The kernels then read Acc directly
// (converting value by value while packing cost a fifth of a float16 layer).
template <class T>
class AccFilter {
 public:
  using Acc = typename AccumulatorOf<T>::type;

  AccFilter(const Geometry& g, const TensorView& filter)
      : widened_(std::is_same_v<T, Acc> ? 0 : filter.element_count()), view_(filter) {
    if constexpr (!std::is_same_v<T, Acc>) {
      view_.dtype = DataType::Float32;  // Acc of float16
      view_.byte_strides = packed_strides(filter.sizes);
      for (std::int64_t& stride : view_.byte_strides) stride *= std::int64_t{sizeof(Acc)};
      view_.data = widened_.get();
      const Dims kernel_strides = spatial(filter.byte_strides);
      const std::int64_t taps = g.kernel.product(), rows = filter.sizes[0] * filter.sizes[1];
      parallel_for(0, rows, std::max<std::int64_t>(1, (1 << 14) / taps), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          const std::byte* src = static_cast<const std::byte*>(filter.data) + r / filter.sizes[1] * filter.byte_strides[0] +
                                 r % filter.sizes[1] * filter.byte_strides[1];
          for_each_run(g.kernel, kernel_strides, 0, taps, [&](std::int64_t offset, std::int64_t first, std::int64_t len) {
            load_run<T, Acc>(src + offset, kernel_strides[g.D - 1], len, widened_.get() + r * taps + first);
          });
        }
      });
    }
  }
  const TensorView& view() const { return view_; }

 private:
  Scratch<Acc> widened_;
  TensorView view_;
};

// The filter as the matrix A of the forward GEMM: row oc, column k = ic' * taps + t holds the
// weight window tap t multiplies (the mirrored tap in convolution mode). `dense` when every row
// is a contiguous run of Acc in column order (cross-correlation with a dense {OutC, InC/G, K...}
// filter): then row oc is dense_row(oc), ld apart, and packers read plain rows.
template <class Acc>
struct FilterMatrix {
  const std::byte* data;
  std::int64_t row_step;                    // bytes between output channels
  std::vector<std::int64_t> column_offset;  // bytes, within an output channel's filter
  bool dense = false;
  std::int64_t ld = 0;

  FilterMatrix(const Geometry& g, const TensorView& filter, const Taps& tap, bool flip)
      : data(static_cast<const std::byte*>(filter.data)), row_step(filter.byte_strides[0]) {
    const std::int64_t taps = std::ssize(tap.index);
    for (std::int64_t c = 0; c < g.in_per_group; ++c) {
      for (std::int64_t t = 0; t < taps; ++t) column_offset.push_back(c * filter.byte_strides[1] + tap.filter(t, flip));
    }
    constexpr std::int64_t kSize = sizeof(Acc);
    dense = aligned(data, alignof(Acc)) && row_step % kSize == 0;
    for (std::int64_t k = 0; k < std::ssize(column_offset) && dense; ++k) dense = column_offset[k] == k * kSize;
    ld = row_step / kSize;
  }
  const Acc* dense_row(std::int64_t oc) const { return reinterpret_cast<const Acc*>(data + oc * row_step); }
  Acc at(std::int64_t oc, std::int64_t k) const {
    return load_value<Acc, Acc>(data + oc * row_step + column_offset[static_cast<std::size_t>(k)]);
  }
  // dst[k * width + o] = at(oc + o, k0 + k) for k < depth, o < used, and 0 for o in [used,
  // width): the direct kernels' layout from any strides (a column at a time: one offset each).
  void gather_columns(std::int64_t oc, std::int64_t used, std::int64_t k0, std::int64_t depth, std::int64_t width,
                      Acc* dst) const {
    for (std::int64_t k = 0; k < depth; ++k, dst += width) {
      const std::byte* column = data + oc * row_step + column_offset[static_cast<std::size_t>(k0 + k)];
      if (row_step == std::int64_t{sizeof(Acc)}) {  // output channels side by side: the column is a run
        std::memcpy(dst, column, static_cast<std::size_t>(used) * sizeof(Acc));
      } else {
        for (std::int64_t o = 0; o < used; ++o) dst[o] = load_value<Acc, Acc>(column + o * row_step);
      }
      std::fill(dst + used, dst + width, Acc(0));
    }
  }
};

// ---------------------------------------------------------------------------------------------
// The forward kernels read the input through padded planes: per input channel, a copy covering
// every tap of every output (padded index 0 is input index -start, zeros outside the input), in
// the accumulation type. For the GEMM and the row-wise depthwise kernel its last axis is split
// into `stride` phases (phase q holds padded columns q, q + stride, ...), so that for any tap the
// outputs of one output row read consecutive values, copied or summed as runs; the direct
// kernel broadcasts values one by one and needs no split. Either way output row r, column x,
// tap t reads plane[row_base[r] + tap_offset[t] + x * column_step] (column_step 1 with phases,
// else the stride).

// The forward window over the input: its blocks are the output positions.
BlockWalker forward_walker(const Geometry& g) {
  std::vector<WindowAxis> axes(static_cast<std::size_t>(g.D));
  for (int a = 0; a < g.D; ++a)
    axes[a] = WindowAxis{g.in_spatial[a], g.kernel[a], g.strides[a], g.dilations[a], g.start[a], g.end[a]};
  return BlockWalker(std::move(axes));
}

#if DMLOPS_X86
// even[i] = src[2i], odd[i] = src[2i + 1] for i < pairs: float rows of a stride-2 layer, eight
// pairs per step (two loads, two shuffles, two lane permutes).
DMLOPS_TARGET("avx2") void split_pairs_avx2(const float* src, std::int64_t pairs, float* even, float* odd) {
  std::int64_t i = 0;
  for (; i + 8 <= pairs; i += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * i), b = _mm256_loadu_ps(src + 2 * i + 8);
    // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6], likewise for the odd entries.
    const __m256d e = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
    const __m256d o = _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm256_storeu_ps(even + i, _mm256_castpd_ps(_mm256_permute4x64_pd(e, _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(odd + i, _mm256_castpd_ps(_mm256_permute4x64_pd(o, _MM_SHUFFLE(3, 1, 2, 0))));
  }
  for (; i < pairs; ++i) even[i] = src[2 * i], odd[i] = src[2 * i + 1];
}
#endif

// dst[q * phase_len + i] = row[i * phases + q]: a padded row split into its phases, where
// row[x] = in[x - first] for x in [first, stop) and 0 elsewhere (so `in` may be the input row
// itself: read, never copied first).
template <class Acc>
void split_phases(const Acc* in, std::int64_t first, std::int64_t stop, std::int64_t phases, std::int64_t phase_len,
                  Acc* dst) {
  std::int64_t lo = 0, hi = 0;  // entries [lo, hi) of every phase written by the vector kernel
  if constexpr (std::is_same_v<Acc, float>) {
#if DMLOPS_X86
    if (phases == 2 && avx2_enabled()) {  // the pairs (2i, 2i + 1) inside [first, stop)
      lo = std::min((first + 1) / 2, phase_len);
      hi = std::clamp(stop / 2, lo, phase_len);
      if (hi > lo) split_pairs_avx2(in + (2 * lo - first), hi - lo, dst + lo, dst + phase_len + lo);
    }
#endif
  }
  const auto write = [&](std::int64_t q, std::int64_t i) {
    const std::int64_t x = i * phases + q;
    dst[q * phase_len + i] = x >= first && x < stop ? in[x - first] : Acc(0);
  };
  for (std::int64_t q = 0; q < phases; ++q) {
    for (std::int64_t i = 0; i < lo; ++i) write(q, i);
    for (std::int64_t i = hi; i < phase_len; ++i) write(q, i);
  }
}

struct PaddedPlane {
  int last = 0;
  Dims padded, row_strides;  // row_strides in elements, over the outer axes
  std::int64_t phases = 1, phase_len = 0, row_len = 0, rows = 1, size = 0;
  std::int64_t out_width = 0, column_step = 1;
  std::vector<std::int64_t> tap_offset, row_base;
  std::int64_t row_first = 0, row_stop = 0;  // the padded row's entries [row_first, row_stop) inside the input

  PaddedPlane(const Geometry& g, const Taps& tap, bool split_phases) : last(g.D - 1) {
    for (int a = 0; a < g.D; ++a)
      padded.push_back((g.out_spatial[a] - 1) * g.strides[a] + (g.kernel[a] - 1) * g.dilations[a] + 1);
    phases = split_phases ? g.strides[last] : 1;
    column_step = g.strides[last] / phases;
    phase_len = ceil_div(padded[last], phases);
    row_len = phases * phase_len;
    row_strides = Dims::filled(g.D, row_len);
    for (int a = last - 2; a >= 0; --a) row_strides[a] = row_strides[a + 1] * padded[a + 1];
    for (int a = 0; a < last; ++a) rows *= padded[a];
    size = rows * row_len;
    for (const Dims& index : tap.index) {
      const std::int64_t x = index[last] * g.dilations[last];
      std::int64_t offset = x % phases * phase_len + x / phases;
      for (int a = 0; a < last; ++a) offset += index[a] * g.dilations[a] * row_strides[a];
      tap_offset.push_back(offset);
    }
    out_width = g.out_spatial[last];
    const std::int64_t out_rows = g.out_spatial.product() / out_width;
    Dims index = Dims::filled(g.D, 0);
    for (std::int64_t r = 0; r < out_rows; ++r) {
      std::int64_t base = 0;
      for (int a = 0; a < last; ++a) base += index[a] * g.strides[a] * row_strides[a];
      row_base.push_back(base);
      for (int a = last - 1; a >= 0 && ++index[a] == g.out_spatial[a]; --a) index[a] = 0;
    }
    row_first = std::min(g.start[last], padded[last]);
    row_stop = std::clamp(g.start[last] + g.in_spatial[last], row_first, padded[last]);
  }

  // Writes the whole padded planes of `channels` channels into dst + c * size: the input's
  // entries (channel c's plane at src + c * channel_step, spatial byte strides `in_strides`) and
  // zeros around them (only there, so the scratch need not be zero-filled first). A row is made
  // in natural order, in place when it is one channel's without phases, else in `lines`
  // (channels * row_len values, zero outside [row_first, row_stop) of each row_len, which this
  // never writes), then copied or split into its phases; one channel's contiguous row of Acc
  // is split straight from the input. Several channels at once suit inputs
  // whose channels are closer in memory than their columns (channels-last): each input row is
  // then read once, a cache line of channels at a time, instead of once per channel.
  template <class T, class Acc>
  void fill(const Geometry& g, const std::byte* src, std::int64_t channel_step, std::int64_t channels,
            const Dims& in_strides, Acc* dst, Acc* lines) const {
    const std::int64_t width = row_stop - row_first, step = in_strides[last];
    for_each_row(g, in_strides, 0, rows, [&](std::int64_t r, bool inside, std::int64_t offset) {
      Acc* dst_row = dst + r * row_len;
      if (!inside) {
        for (std::int64_t c = 0; c < channels; ++c) std::fill_n(dst_row + c * size, row_len, Acc(0));
        return;
      }
      if (channels == 1 && phases == 1) {
        std::fill_n(dst_row, row_first, Acc(0));
        load_run<T, Acc>(src + offset, step, width, dst_row + row_first);
        std::fill(dst_row + row_stop, dst_row + row_len, Acc(0));
        return;
      }
      if (channels == 1 && std::is_same_v<T, Acc> && step == sizeof(T) && aligned(src + offset, alignof(Acc))) {
        split_phases(reinterpret_cast<const Acc*>(src + offset), row_first, row_stop, phases, phase_len, dst_row);
        return;
      }
      if (channels == 1) {
        load_run<T, Acc>(src + offset, step, width, lines + row_first);
      } else {
        for (std::int64_t x = 0; x < width; ++x) {
          const std::byte* column = src + offset + x * step;
          for (std::int64_t c = 0; c < channels; ++c)
            lines[c * row_len + row_first + x] = load_value<T, Acc>(column + c * channel_step);
        }
      }
      for (std::int64_t c = 0; c < channels; ++c) {
        if (phases == 1) {
          std::memcpy(dst_row + c * size, lines + c * row_len, static_cast<std::size_t>(row_len) * sizeof(Acc));
        } else {
          split_phases(lines + c * row_len, 0, row_len, phases, phase_len, dst_row + c * size);
        }
      }
    });
  }

  // Padded rows [r0, r1) of all `channels` channels interleaved (phases == 1): padded position q
  // of channel c at dst[q * channels + c]. For channels-last inputs, whose rows are then plain
  // copies (one run per row when the channels are the contiguous axis).
  template <class T, class Acc>
  void fill_interleaved(const Geometry& g, const std::byte* src, std::int64_t channel_step, std::int64_t channels,
                        const Dims& in_strides, std::int64_t r0, std::int64_t r1, Acc* dst) const {
    const std::int64_t width = row_stop - row_first, step = in_strides[last], C = channels;
    const bool runs = std::is_same_v<T, Acc> && channel_step == sizeof(T) && step == C * channel_step;
    for_each_row(g, in_strides, r0, r1, [&](std::int64_t r, bool inside, std::int64_t offset) {
      Acc* row = dst + r * row_len * C;
      if (!inside) {
        std::fill_n(row, row_len * C, Acc(0));
        return;
      }
      std::fill_n(row, row_first * C, Acc(0));
      std::fill(row + row_stop * C, row + row_len * C, Acc(0));
      if (runs) {
        load_run<T, Acc>(src + offset, sizeof(T), width * C, row + row_first * C);
        return;
      }
      for (std::int64_t x = 0; x < width; ++x)
        load_run<T, Acc>(src + offset + x * step, channel_step, C, row + (row_first + x) * C);
    });
  }

 private:
  // fn(r, inside, offset) for padded rows [r0, r1): whether row r (its indices on the outer
  // axes) lies inside the input, and the byte offset of that input row.
  template <class Fn>
  void for_each_row(const Geometry& g, const Dims& in_strides, std::int64_t r0, std::int64_t r1, Fn&& fn) const {
    Dims index = Dims::filled(g.D, 0);  // the padded row, over the outer axes
    std::int64_t rest = r0;
    for (int a = last - 1; a >= 0; --a) {
      index[a] = rest % padded[a];
      rest /= padded[a];
    }
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t offset = 0;
      bool inside = true;
      for (int a = 0; a < last; ++a) {
        const std::int64_t i = index[a] - g.start[a];
        inside = inside && i >= 0 && i < g.in_spatial[a];
        offset += i * in_strides[a];
      }
      for (int a = last - 1; a >= 0 && ++index[a] == padded[a]; --a) index[a] = 0;
      fn(r, inside, offset);
    }
  }
};

// Every input channel once in its padded plane (converted to Acc once, not once per tap), unless
// the input planes already are their own padded planes (no padding, unit last-axis stride, dense
// planes of Acc: e.g. a 1x1 convolution of a contiguous float input, then a plain GEMM on the
// input). With `interleave` (for a kernel that reads values one by one, so any spacing will do:
// phases == 1), a channels-last input keeps its layout: padded position q of channel c is
// plane(n, c)[q * position_step()], position_step() the channel count, and each padded row is
// one copy of the input row.
template <class T>
class PaddedInput {
 public:
  using Acc = typename AccumulatorOf<T>::type;

  PaddedInput(const Geometry& g, const PaddedPlane& pad, const TensorView& in, bool interleave = false)
      : in_(in), in_channels_(g.in_channels), size_(pad.size), direct_(reads_in_place(g, pad, in)),
        interleaved_(!direct_ && interleave && channels_last(g, in)),
        planes_(direct_ ? 0 : checked_mul(g.batch * g.in_channels, pad.size, kOp, ": the padded input's element count")) {
    if (direct_) return;
    const Dims in_strides = spatial(in.byte_strides);
    const auto* in_base = static_cast<const std::byte*>(in.data);
    if (interleaved_) {
      const std::int64_t grain = std::max<std::int64_t>(1, (1 << 14) / (pad.row_len * g.in_channels));
      parallel_for(0, g.batch * pad.rows, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end;) {  // a run of rows of one batch item
          const std::int64_t n = i / pad.rows, r1 = std::min(end - n * pad.rows, pad.rows);
          pad.fill_interleaved<T>(g, in_base + n * in.byte_strides[0], in.byte_strides[1], g.in_channels, in_strides,
                                  i - n * pad.rows, r1, planes_.get() + n * g.in_channels * pad.size);
          i = n * pad.rows + r1;
        }
      });
      return;
    }
    // Channels-last inputs: kChannelBlock channels (a cache line of float32) per task.
    const bool interleaved = channels_last(g, in);
    const std::int64_t channels = interleaved ? kChannelBlock : 1, per_batch = ceil_div(g.in_channels, channels);
    parallel_for(0, g.batch * per_batch, std::max<std::int64_t>(1, (1 << 14) / (pad.size * channels)), [&](std::int64_t begin, std::int64_t end) {
      std::vector<Acc> lines(static_cast<std::size_t>(channels * pad.row_len));  // zero: see PaddedPlane::fill
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t n = i / per_batch, c0 = i % per_batch * channels;
        pad.fill<T>(g, in_base + n * in.byte_strides[0] + c0 * in.byte_strides[1], in.byte_strides[1],
                    std::min(channels, g.in_channels - c0), in_strides, planes_.get() + (n * g.in_channels + c0) * pad.size,
                    lines.data());
      }
    });
  }

  // Input channel c of batch item n as its padded plane.
  const Acc* plane(std::int64_t n, std::int64_t c) const {
    if (direct_)
      return reinterpret_cast<const Acc*>(static_cast<const std::byte*>(in_.data) + n * in_.byte_strides[0] +
                                          c * in_.byte_strides[1]);
    if (interleaved_) return planes_.get() + n * in_channels_ * size_ + c;
    return planes_.get() + (n * in_channels_ + c) * size_;
  }
  // Elements between neighbouring padded positions of a plane.
  std::int64_t position_step() const { return interleaved_ ? in_channels_ : 1; }

 private:
  static bool channels_last(const Geometry& g, const TensorView& in) {
    return std::abs(in.byte_strides[1]) < std::abs(in.byte_strides[1 + g.D]);
  }
  static bool reads_in_place(const Geometry& g, const PaddedPlane& pad, const TensorView& in) {
    const Dims in_strides = spatial(in.byte_strides);
    bool direct = std::is_same_v<T, Acc> && pad.phases == 1 && pad.padded == g.in_spatial && pad.size == g.in_spatial.product() &&
                  aligned(in.data, alignof(Acc)) && in.byte_strides[0] % std::int64_t{sizeof(Acc)} == 0 &&
                  in.byte_strides[1] % std::int64_t{sizeof(Acc)} == 0;
    for (int a = 0; a < g.D; ++a) {
      direct = direct && g.start[a] == 0 &&
               in_strides[a] == (a == g.D - 1 ? std::int64_t{sizeof(Acc)} : in_strides[a + 1] * g.in_spatial[a + 1]);
    }
    return direct;
  }

  const TensorView& in_;
  std::int64_t in_channels_, size_;
  bool direct_, interleaved_;
  Scratch<Acc> planes_;
};

// ---------------------------------------------------------------------------------------------
// FORWARD

// A count of position blocks near `blocks` for which `per_block * count` equal tasks spread
// evenly over parallel_for's chunks: a multiple of the threads within one round of chunks (one
// task per chunk), else a multiple of the chunk count. A thread that runs one task more than the
// others sets the time (5 tasks on 2 threads take 3 units, not 2.5). `blocks` itself when no
// count within a factor of two qualifies.
std::int64_t balanced_count(std::int64_t per_block, std::int64_t blocks, std::int64_t threads) {
  if (threads == 1) return blocks;
  const std::int64_t chunks = kParallelChunksPerThread * threads;
  const auto even = [&](std::int64_t count) {
    const std::int64_t tasks = per_block * count;
    return tasks % threads == 0 && (tasks <= chunks || tasks % chunks == 0);
  };
  for (std::int64_t count = blocks; count >= std::max<std::int64_t>(1, blocks / 2); --count) {
    if (even(count)) return count;
  }
  for (std::int64_t count = blocks + 1; count <= 2 * blocks; ++count) {
    if (even(count)) return count;
  }
  return blocks;
}

// A one-tap window that never reaches the padding (no start padding, the last output inside
// the input) only samples the input: the convolution is then a 1x1 stride-1 one of the strided
// view x[..., ::stride] (its byte strides times the window strides). Rewritten that way, the
// padded planes hold only the sampled positions, densely (a stride-2 layer copies a quarter
// of its input instead of splitting every row into phases), and the product runs on them as on
// any pointwise layer. Empty when there is nothing to rewrite (unit strides) or it does not apply.
std::optional<std::pair<Geometry, TensorView>> sampled_pointwise(const Geometry& g, const TensorView& in) {
  bool applies = false;
  for (int a = 0; a < g.D; ++a) {
    if (g.kernel[a] != 1 || g.start[a] != 0 || (g.out_spatial[a] - 1) * g.strides[a] >= g.in_spatial[a]) return {};
    applies = applies || g.strides[a] > 1;
  }
  if (!applies) return {};
  std::pair<Geometry, TensorView> sampled{g, in};
  auto& [geometry, view] = sampled;
  for (int a = 0; a < g.D; ++a) {
    geometry.in_spatial[a] = view.sizes[2 + a] = g.out_spatial[a];
    view.byte_strides[2 + a] *= g.strides[a];
  }
  geometry.strides = geometry.dilations = Dims::filled(g.D, 1);
  geometry.end = Dims::filled(g.D, 0);
  return sampled;
}

template <class T>
void forward_direct(const ConvolutionDesc& desc, const Geometry& g, const Views& v);

// Layers of float sums with at least a vector of output channels per group run direct, without
// im2col: any window, and pointwise layers with enough input channels (with fewer, a tile sums
// too few terms to pay for reading the input once per channel block, where the GEMM reads one
// packed panel for all output channels: 1x1 64>256@56 is 5% slower direct, 256>64@56 12% faster).
bool direct_applies(const Geometry& g, std::int64_t taps) {
  return (taps > 1 || g.in_per_group >= kDirectPointwiseChannels) && g.out_per_group >= simd_lanes<float>();
}

template <class T>
void forward(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  if (const auto sampled = sampled_pointwise(g, v.in))
    return forward<T>(desc, sampled->first, Views{sampled->second, v.filter, v.bias, v.out});
  using Acc = typename AccumulatorOf<T>::type;
  if constexpr (std::is_same_v<Acc, float>) {
    if (direct_applies(g, g.kernel.product())) return forward_direct<T>(desc, g, v);
  }
  constexpr std::int64_t NR = gemm_columns<Acc>();
  const BlockWalker walker = forward_walker(g);
  const std::int64_t taps = walker.tap_count(), positions = walker.block_count();
  const std::int64_t K = g.in_per_group * taps, M = g.out_per_group, M_pad = round_up(M, kGemmRows);
  const bool flip = desc.mode == ConvolutionMode::Convolution;

  const AccFilter<T> acc_filter(g, v.filter);
  const TensorView& filter = acc_filter.view();
  const Taps tap(walker, filter);
  const FilterMatrix<Acc> matrix(g, filter, tap, flip);
  // Packs rows [row0, row0 + count) of group grp's A, columns [k0, k0 + depth), as pack_gemm_a does.
  const auto pack_filter = [&](std::int64_t grp, std::int64_t row0, std::int64_t count, std::int64_t k0, std::int64_t depth,
                               Acc* dst) {
    const std::int64_t oc = grp * M + row0;
    if (matrix.dense) return pack_gemm_a_rows(count, depth, matrix.dense_row(oc) + k0, matrix.ld, dst);
    pack_gemm_a(count, depth, [&](std::int64_t r, std::int64_t k) { return matrix.at(oc + r, k0 + k); }, dst);
  };

  // Position blocks: whole micro-panels, spread evenly (their sizes differ by at most NR), whose
  // im2col panel fits kPanelBytes (at least kMinBlock positions, so that A, streamed once per
  // task, is reused).
  const std::int64_t fit = std::max(kMinBlock, kPanelBytes / (K * static_cast<std::int64_t>(sizeof(Acc))));
  const std::int64_t position_panels = ceil_div(positions, NR);
  std::int64_t blocks = ceil_div(positions, fit);
  // Output-channel blocks (multiples of kGemmRows) only when (batch, group, position block)
  // tasks are too few for the threads. The blocks change which tile computes an element, never
  // its sum, so the results do not depend on them.
  const std::int64_t threads = num_threads();
  std::int64_t channel_blocks = 1;
  if (g.batch * g.groups * blocks < 2 * threads)
    channel_blocks = std::min(ceil_div(2 * threads, g.batch * g.groups * blocks), std::max<std::int64_t>(1, M_pad / kMinChannelBlock));
  const std::int64_t channel_block = round_up(ceil_div(M, channel_blocks), kGemmRows);
  channel_blocks = ceil_div(M, channel_block);
  // With several channel blocks per position block, every position block's B is packed once,
  // up front, by all threads together, and shared by its channel blocks' tasks (packing it in
  // each task would repeat the copy per channel block and leave the threads waiting on it).
  const bool shared_b = channel_blocks > 1;
  // Else B is packed piece by piece inside the product (in L1, never written out whole) when
  // A's K block fits L2, which that order needs; else the whole panel first, once per task.
  const bool inline_b = !shared_b && channel_block * kGemmDepth * std::int64_t{sizeof(Acc)} <= kGemmBlockBytes;
  // A B that is never written out does not bound the blocks: their count is then chosen so that
  // the (equal) tasks spread evenly over the threads.
  if (inline_b) blocks = balanced_count(g.batch * g.groups, blocks, threads);
  blocks = std::min(blocks, position_panels);
  const std::int64_t block = NR * ceil_div(position_panels, blocks);  // the largest
  const auto block_start = [&](std::int64_t b) { return std::min(positions, NR * (position_panels * b / blocks)); };
  const std::int64_t outer = g.batch * g.groups * blocks, tasks = outer * channel_blocks;
  const std::int64_t grain =
      std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, 2 * channel_block * K * block));

  const Dims out_strides = spatial(v.out.byte_strides);
  auto* out_base = static_cast<std::byte*>(v.out.data);

  const PaddedPlane pad(g, tap, true);
  const PaddedInput<T> input(g, pad, v.in);
  const auto plane_of = [&](std::int64_t n, std::int64_t c) { return input.plane(n, c); };

  // A position block's positions are pieces of output rows cut at micro-panel boundaries; row
  // k = (c, t) of its B reads them from channel c's padded plane shifted by tap t. `locate`
  // writes both for one (batch, group, position block) task.
  const auto locate = [&](std::int64_t position_task, std::vector<GemmPiece>& pieces, std::vector<const Acc*>& sources) {
    const std::int64_t n = position_task / (g.groups * blocks), grp = position_task / blocks % g.groups;
    const std::int64_t p0 = block_start(position_task % blocks), count = block_start(position_task % blocks + 1) - p0;
    pieces.clear();
    for (std::int64_t col = 0; col < count;) {
      const std::int64_t r = (p0 + col) / pad.out_width, x = (p0 + col) % pad.out_width;
      const std::int64_t len = std::min({pad.out_width - x, count - col, NR - col % NR});
      // Consecutive rows that follow each other in the plane (no padding between them, e.g.
      // a pointwise layer) make one piece: one vector copy per k, not one per row part.
      GemmPiece* last = pieces.empty() ? nullptr : &pieces.back();
      if (last && col % NR != 0 && last->offset + last->length == pad.row_base[r] + x) {
        last->length += len;
      } else {
        pieces.push_back({col, pad.row_base[r] + x, len});
      }
      col += len;
    }
    sources.resize(static_cast<std::size_t>(K));
    for (std::int64_t c = 0; c < g.in_per_group; ++c) {
      const Acc* plane = plane_of(n, grp * g.in_per_group + c);
      for (std::int64_t t = 0; t < taps; ++t) sources[c * taps + t] = plane + pad.tap_offset[t];
    }
  };
  // Rows [k0, k0 + depth) of columns [j, j + columns) of a located B, as micro-panels at dst.
  const auto pack_columns = [](const std::vector<GemmPiece>& pieces, const std::vector<const Acc*>& sources,
                               std::int64_t k0, std::int64_t depth, std::int64_t j, std::int64_t columns, Acc* dst) {
    const auto by_column = [](const GemmPiece& piece, std::int64_t column) { return piece.column < column; };
    const auto first = std::lower_bound(pieces.begin(), pieces.end(), j, by_column);
    const auto stop = std::lower_bound(first, pieces.end(), j + columns, by_column);
    pack_gemm_b_gather(depth, sources.data() + k0, pieces.data() + (first - pieces.begin()), stop - first, j, columns, dst);
  };

  // A larger A used by one task only (one batch item, one position block: e.g. 3x3 512@7, whose
  // filter is 9 MB) is packed inside the product too, a K block of an L2 block of rows at a
  // time, instead of being written out whole and read back; else once, up front, in parallel.
  const bool inline_a = !inline_b && g.batch * blocks == 1;
  const Scratch<Acc> packed(inline_a ? 0 : g.groups * M_pad * K);
  if (!inline_a) {
    const std::int64_t panels = M_pad / kGemmRows;
    parallel_for(0, g.groups * panels, std::max<std::int64_t>(1, (1 << 16) / (kGemmRows * K)), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t task = begin; task < end; ++task) {
        const std::int64_t grp = task / panels, p = task % panels * kGemmRows;
        pack_filter(grp, p, std::min(kGemmRows, M - p), 0, K, packed.get() + (grp * M_pad + p) * K);
      }
    });
  }
  const std::int64_t micro_panels = block / NR;
  const Scratch<Acc> shared(shared_b ? outer * K * block : 0);
  if (shared_b) {
    parallel_for(0, outer * micro_panels, std::max<std::int64_t>(1, (1 << 14) / (K * NR)), [&](std::int64_t begin, std::int64_t end) {
      std::vector<GemmPiece> pieces;
      std::vector<const Acc*> sources;
      for (std::int64_t i = begin; i < end;) {  // a run of micro-panels of one position block
        const std::int64_t position_task = i / micro_panels, q0 = i % micro_panels;
        const std::int64_t q1 = std::min(micro_panels, q0 + (end - i));
        const std::int64_t b = position_task % blocks, width = round_up(block_start(b + 1) - block_start(b), NR);
        locate(position_task, pieces, sources);
        const std::int64_t j1 = std::min(q1 * NR, width);
        if (j1 > q0 * NR)
          pack_columns(pieces, sources, 0, K, q0 * NR, j1 - q0 * NR, shared.get() + position_task * K * block + q0 * NR * K);
        i += q1 - q0;
      }
    });
  }
  parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    // Consecutive tasks of one position block (channel blocks vary fastest) reuse the packed panel.
    std::vector<GemmPiece> pieces;
    std::vector<const Acc*> sources;
    const Scratch<Acc> own_panel(inline_b || shared_b ? 0 : K * block), result(channel_block * block);
    const GemmPackB<Acc> pack_piece = [&](std::int64_t k0, std::int64_t depth, std::int64_t j, std::int64_t columns, Acc* dst) {
      pack_columns(pieces, sources, k0, depth, j, columns, dst);
    };
    std::int64_t packed_for = -1;
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t position_task = task / channel_blocks, m0 = task % channel_blocks * channel_block;
      const std::int64_t n = position_task / (g.groups * blocks), grp = position_task / blocks % g.groups;
      const std::int64_t p0 = block_start(position_task % blocks), count = block_start(position_task % blocks + 1) - p0;
      const std::int64_t width = round_up(count, NR);
      const Acc* panel = shared_b ? shared.get() + position_task * K * block : own_panel.get();
      if (!shared_b && packed_for != position_task) {
        packed_for = position_task;
        locate(position_task, pieces, sources);
        if (!inline_b) pack_columns(pieces, sources, 0, K, 0, width, own_panel.get());
      }
      const std::int64_t rows = std::min(channel_block, M - m0);
      const Acc* a = inline_a ? nullptr : packed.get() + (grp * M_pad + m0) * K;
      if (inline_b) {
        gemm_pack_b_inline(round_up(rows, kGemmRows), width, K, a, pack_piece, result.get(), width);
      } else if (inline_a) {
        const GemmPackA<Acc> pack_rows = [&](std::int64_t k0, std::int64_t depth, std::int64_t r0, std::int64_t count, Acc* dst) {
          pack_filter(grp, m0 + r0, std::min(count, rows - r0), k0, depth, dst);
        };
        gemm_pack_a_inline(round_up(rows, kGemmRows), width, K, pack_rows, panel, result.get(), width);
      } else {
        gemm_packed(round_up(rows, kGemmRows), width, K, a, panel, result.get(), width);
      }
      for (std::int64_t i = 0; i < rows; ++i) {
        const std::int64_t oc = grp * M + m0 + i;
        finish_row<T, Acc>(result.get() + i * width, count, bias_of<T, Acc>(v.bias, oc), desc.fused_activation,
                           out_base + n * v.out.byte_strides[0] + oc * v.out.byte_strides[1], g.out_spatial,
                           out_strides, p0);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// FORWARD, dense layers of float sums, direct (core/direct.hpp): no im2col panel. The output
// channels of a group are cut into blocks of `vectors` x L (direct_vectors() vectors while that
// many remain, then 2, then 1); a block's filter is packed once, [k][o]. A task is (n, group,
// band of consecutive output positions, channel block): per pass over a few input channels
// (whose packed filter, kDirectFilterBytes, stays in L1), direct_window_product adds their terms
// to the band's interleaved sums (position-major, `width` channels), every output reading its
// window in the padded planes at row_base + column. Then the bias and activation go on in place,
// and store_lanes moves the channels into the output. The sums run in the GEMM's order, so they
// do not depend on the bands, the blocks or the thread count.

template <class T>
void forward_direct(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = float;
  const BlockWalker walker = forward_walker(g);
  const std::int64_t taps = walker.tap_count(), M = g.out_per_group, K = g.in_per_group * taps;
  const AccFilter<T> acc_filter(g, v.filter);
  const Taps tap(walker, acc_filter.view());
  const FilterMatrix<Acc> matrix(g, acc_filter.view(), tap, desc.mode == ConvolutionMode::Convolution);
  const PaddedPlane pad(g, tap, false);
  const PaddedInput<T> input(g, pad, v.in, true);
  const std::int64_t step = input.position_step();
  std::vector<std::int64_t> tap_offsets(pad.tap_offset);
  for (std::int64_t& offset : tap_offsets) offset *= step;

  const std::int64_t L = simd_lanes<Acc>(), most = direct_vectors();
  struct ChannelBlock {
    std::int64_t first, vectors;  // first output channel in the group
  };
  std::vector<ChannelBlock> blocks;
  for (std::int64_t first = 0, left = ceil_div(M, L); left > 0;) {
    const std::int64_t vectors = left >= most ? most : left >= 2 ? 2 : 1;
    blocks.push_back({first, vectors});
    first += vectors * L, left -= vectors;
  }
  const std::int64_t block_count = std::ssize(blocks), padded_M = ceil_div(M, L) * L;

  // Columns [k0, k0 + depth) of group grp's block, as direct_window_product reads them ([k][o]).
  const auto pack_block = [&](std::int64_t grp, const ChannelBlock& block, std::int64_t k0, std::int64_t depth, Acc* dst) {
    const std::int64_t oc = grp * M + block.first, width = block.vectors * L, used = std::min(width, M - block.first);
    if (matrix.dense) return pack_direct_filter(matrix.dense_row(oc) + k0, matrix.ld, used, depth, width, dst);
    matrix.gather_columns(oc, used, k0, depth, width, dst);
  };
  // The same columns into L2, ahead of pack_block: each row's piece is a few cache lines, 18 KB
  // from the next row's (3x3 512@7), too short a run for the hardware prefetcher, so packing
  // them pass by pass would wait on L3 or memory for every line (a third of such a layer's time).
  const auto prefetch_block = [&](std::int64_t grp, const ChannelBlock& block, std::int64_t k0, std::int64_t depth) {
    if (!matrix.dense) return;
    const std::int64_t oc = grp * M + block.first, used = std::min(block.vectors * L, M - block.first);
    for (std::int64_t o = 0; o < used; ++o) {
      const Acc* row = matrix.dense_row(oc + o) + k0;
      for (std::int64_t k = 0; k < depth; k += kCacheLine / std::int64_t{sizeof(Acc)}) DMLOPS_PREFETCH(row + k);
    }
  };

  // Bands of consecutive output positions, about kDirectBandBytes of sums each, but at least two
  // tasks per thread (a small layer on many threads: 3x3 64@56 has 7 bands of that size, for 16
  // threads) while bands keep kDirectMinBand positions, as many as spread the tasks evenly over
  // the threads.
  const std::int64_t positions = g.out_spatial.product(), threads = num_threads();
  const std::int64_t max_width = most * L, per_band = g.batch * g.groups * block_count;
  std::int64_t bands = ceil_div(positions * max_width * std::int64_t{sizeof(Acc)}, kDirectBandBytes);
  bands = std::max(bands, std::min(ceil_div(2 * threads, per_band), positions / kDirectMinBand));
  bands = std::clamp<std::int64_t>(balanced_count(per_band, bands, threads), 1, positions);
  const auto band_start = [&](std::int64_t b) { return positions * b / bands; };
  const std::int64_t band_max = ceil_div(positions, bands);
  // Input channels per pass: their packed filter stays in L1.
  const std::int64_t channel_pass =
      std::clamp<std::int64_t>(kDirectFilterBytes / (taps * max_width * std::int64_t{sizeof(Acc)}), 1, g.in_per_group);

  // A block's filter used by one task only (one batch item, one band: e.g. 3x3 512@7, whose
  // filter is 9 MB) is packed by that task a pass at a time, just before the pass, into L1;
  // else every block's once, up front, by all threads (group grp's block at packed +
  // (grp * padded_M + first) * K), and shared.
  const bool pack_in_pass = g.batch * bands == 1;
  const Scratch<Acc> packed(pack_in_pass ? 0 : checked_mul(g.groups * padded_M, K, kOp, ": the packed filter's element count"));
  if (!pack_in_pass) {
    // In pieces of kDirectPackColumns columns, so that one block's filter (all a 64-channel
    // layer has) is packed by every thread too.
    const std::int64_t pieces = ceil_div(K, kDirectPackColumns);
    parallel_for(0, g.groups * block_count * pieces, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t grp = i / (block_count * pieces), k0 = i % pieces * kDirectPackColumns;
        const ChannelBlock& block = blocks[static_cast<std::size_t>(i / pieces % block_count)];
        const std::int64_t width = block.vectors * L;
        pack_block(grp, block, k0, std::min(kDirectPackColumns, K - k0),
                   packed.get() + (grp * padded_M + block.first) * K + k0 * width);
      }
    });
  }

  const Dims out_strides = spatial(v.out.byte_strides);
  auto* out_base = static_cast<std::byte*>(v.out.data);
  const bool direct_out = std::is_same_v<T, Acc> && elements_of<Acc>(v.out);
  const std::int64_t tasks = per_band * bands, out_width = pad.out_width;
  const std::int64_t grain = std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, 2 * K * max_width * band_max));
  parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    const Scratch<Acc> sums(band_max * max_width), staging(direct_out ? 0 : L * band_max);
    const Scratch<Acc> pass_filter(pack_in_pass ? channel_pass * taps * max_width : 0);
    std::vector<Acc> bias(static_cast<std::size_t>(max_width));
    std::vector<const Acc*> planes(static_cast<std::size_t>(channel_pass));
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(band_max));
    for (std::int64_t task = begin; task < end; ++task) {
      const ChannelBlock& block = blocks[static_cast<std::size_t>(task % block_count)];
      const std::int64_t b = task / block_count % bands, grp = task / (block_count * bands) % g.groups;
      const std::int64_t n = task / (block_count * bands * g.groups);
      const std::int64_t width = block.vectors * L, used = std::min(width, M - block.first);
      const std::int64_t p0 = band_start(b), count = band_start(b + 1) - p0;
      for (std::int64_t p = 0; p < count; ++p)  // where each output's window starts in the padded planes
        offsets[p] = (pad.row_base[(p0 + p) / out_width] + (p0 + p) % out_width * pad.column_step) * step;
      for (std::int64_t c0 = 0; c0 < g.in_per_group; c0 += channel_pass) {
        const std::int64_t channels = std::min(channel_pass, g.in_per_group - c0);
        for (std::int64_t c = 0; c < channels; ++c) planes[c] = input.plane(n, grp * g.in_per_group + c0 + c);
        const Acc* filter = packed.get() + (grp * padded_M + block.first) * K + c0 * taps * width;
        if (pack_in_pass) {
          pack_block(grp, block, c0 * taps, channels * taps, pass_filter.get());
          filter = pass_filter.get();
          const std::int64_t next = (c0 + channels) * taps;
          prefetch_block(grp, block, next, std::min(K - next, channel_pass * taps));
        }
        direct_window_product(channels, taps, planes.data(), tap_offsets.data(), offsets.data(), count, block.vectors,
                              filter, c0 > 0, sums.get());
      }
      const std::int64_t oc = grp * M + block.first;
      if (v.bias) {
        for (std::int64_t o = 0; o < width; ++o) bias[o] = o < used ? bias_of<T, Acc>(v.bias, oc + o) : Acc(0);
        for (std::int64_t x = 0; x < count; ++x) {
          for (std::int64_t o = 0; o < width; ++o) sums.get()[x * width + o] += bias[o];
        }
      }
      if (desc.fused_activation) apply_activation(*desc.fused_activation, sums.get(), count * width);
      store_lanes<T, Acc>(sums.get(), width, count, used, out_base + n * v.out.byte_strides[0] + oc * v.out.byte_strides[1],
                          v.out.byte_strides[1], g, out_strides, p0, direct_out, staging.get());
    }
  });
}

// ---------------------------------------------------------------------------------------------
// FORWARD, one input channel per group, L input channels at a time in the vector lanes
// (core/lanes.hpp, L = lane_count<Acc>()). A task is (n, block of L input channels, band of
// output indices along the first spatial axis). It interleaves the block's input into a
// zero-padded slab [padded axis 0 range of the band][padded axes 1..D-1][L] holding every
// window of the band; then each output position is one lane_window_sum over the taps (one
// vector FMA per tap for L channels, whatever the stride or dilation, no border tests), the
// bias is added in the lanes, the activation runs over the interleaved results, and they are
// deinterleaved into the output: directly for planes of Acc with element strides, else into
// channel rows stored by finish_row. With a channel multiplier, pass m of a block computes output
// channels (c0 + l) * multiplier + m from the same slab. Bands keep the slab in L2 (kSlabBytes)
// and give every thread tasks; an output's sum is the same in any band, so results do not
// depend on the thread count.

struct LaneSlab {
  std::int64_t band = 1, bands = 1, band_positions = 0, size = 0;  // band: axis-0 output indices per band
  Dims extent, strides;                    // the slab of a whole band, per axis; strides in elements
  std::vector<std::int64_t> tap_offsets;   // per window tap, in the slab
  std::vector<std::int64_t> positions;     // per output position of a whole band: its window in the slab
  std::int64_t row_length = 0, columns = 0;  // elements per slab row (axes 0..D-2 fixed) and padded columns

  LaneSlab(const Geometry& g, const Taps& tap, std::int64_t L, std::int64_t element_bytes, std::int64_t blocks) {
    const int D = g.D, last = D - 1;
    std::int64_t per_index = L;  // slab elements per axis-0 index
    for (int a = 1; a < D; ++a) per_index *= (g.out_spatial[a] - 1) * g.strides[a] + (g.kernel[a] - 1) * g.dilations[a] + 1;
    const std::int64_t reach0 = (g.kernel[0] - 1) * g.dilations[0] + 1, out0 = g.out_spatial[0];
    const std::int64_t fit = std::max<std::int64_t>(1, (kSlabBytes / element_bytes / per_index - reach0) / g.strides[0] + 1);
    // At least two tasks per thread when the input allows it.
    const std::int64_t wanted = ceil_div(2 * static_cast<std::int64_t>(num_threads()), g.batch * blocks);
    bands = std::min(out0, std::max(ceil_div(out0, fit), wanted));
    band = ceil_div(out0, bands);
    bands = ceil_div(out0, band);
    extent = Dims::filled(D, 0);
    extent[0] = (band - 1) * g.strides[0] + reach0;
    for (int a = 1; a < D; ++a) extent[a] = (g.out_spatial[a] - 1) * g.strides[a] + (g.kernel[a] - 1) * g.dilations[a] + 1;
    strides = Dims::filled(D, L);
    for (int a = last - 1; a >= 0; --a) strides[a] = strides[a + 1] * extent[a + 1];
    size = strides[0] * extent[0];
    columns = extent[last];
    row_length = columns * L;
    for (const Dims& index : tap.index) {
      std::int64_t offset = 0;
      for (int a = 0; a < D; ++a) offset += index[a] * g.dilations[a] * strides[a];
      tap_offsets.push_back(offset);
    }
    Dims out = g.out_spatial;
    out[0] = band;
    band_positions = out.product();
    Dims index = Dims::filled(D, 0);
    for (std::int64_t p = 0; p < band_positions; ++p) {
      std::int64_t offset = 0;
      for (int a = 0; a < D; ++a) offset += index[a] * g.strides[a] * strides[a];
      positions.push_back(offset);
      for (int a = last; a >= 0 && ++index[a] == out[a]; --a) index[a] = 0;
    }
  }
};

template <class T>
void forward_depthwise_lanes(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = typename AccumulatorOf<T>::type;
  const int D = g.D, last = D - 1;
  const std::int64_t L = lane_count<Acc>(), blocks = ceil_div(g.in_channels, L);
  const BlockWalker walker = forward_walker(g);
  const AccFilter<T> acc_filter(g, v.filter);
  const TensorView& filter = acc_filter.view();
  const Taps tap(walker, filter);
  const std::int64_t taps = walker.tap_count();
  const bool flip = desc.mode == ConvolutionMode::Convolution;
  const LaneSlab slab(g, tap, L, sizeof(Acc), blocks);
  const std::int64_t per_index = slab.band_positions / slab.band;  // output positions per axis-0 index

  const Dims in_strides = spatial(v.in.byte_strides), out_strides = spatial(v.out.byte_strides);
  const auto* in_base = static_cast<const std::byte*>(v.in.data);
  const auto* w = static_cast<const std::byte*>(filter.data);
  auto* out_base = static_cast<std::byte*>(v.out.data);
  // Tensors of Acc whose strides are whole elements are read and written in place.
  const bool direct_in = std::is_same_v<T, Acc> && elements_of<Acc>(v.in);
  const bool direct_out = std::is_same_v<T, Acc> && elements_of<Acc>(v.out);
  constexpr std::int64_t kAcc = sizeof(Acc);
  const std::int64_t multiplier = g.out_per_group, tasks = g.batch * blocks * slab.bands;
  // The filter as rows of taps (filter order) of Acc, filter_ld apart, from which the tasks
  // interleave their weights (backwards in convolution mode: flipping every axis reverses the
  // taps): the filter (of Acc: AccFilter) itself when it is that already, else a copy made once
  // per call. The biases likewise, once.
  bool consecutive_taps = aligned(w, alignof(Acc)) && filter.byte_strides[0] % kAcc == 0;
  for (std::int64_t t = 0; t < taps; ++t) consecutive_taps = consecutive_taps && tap.filter(t, false) == t * kAcc;
  const std::int64_t out_channels = g.out_channels;
  std::vector<Acc> filter_copy, biases(static_cast<std::size_t>(v.bias ? out_channels : 0));
  const Acc* filter_rows = reinterpret_cast<const Acc*>(w);
  std::int64_t filter_ld = filter.byte_strides[0] / kAcc;
  if (!consecutive_taps) {
    filter_copy.resize(static_cast<std::size_t>(out_channels * taps));
    for (std::int64_t oc = 0; oc < out_channels; ++oc) {
      for (std::int64_t t = 0; t < taps; ++t)
        filter_copy[oc * taps + t] = load_value<Acc, Acc>(w + oc * filter.byte_strides[0] + tap.filter(t, false));
    }
    filter_rows = filter_copy.data();
    filter_ld = taps;
  }
  for (std::int64_t oc = 0; oc < std::ssize(biases); ++oc) biases[oc] = bias_of<T, Acc>(v.bias, oc);
  const std::int64_t grain = std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, 2 * multiplier * taps * L * slab.band_positions));
  // The input columns a slab row holds: padded column x (of the band's first) is input column
  // x + column0 - start; for D = 1 the band cuts the row itself.
  const std::int64_t in_width = g.in_spatial[last], start = g.start[last];
  // Slab rows (fixed indices on axes 0..D-2) per axis-0 index, and the axis-0 indices of one
  // chunk: the band is computed a chunk at a time, right after the slab rows it reads are
  // filled, so that those rows and the chunk's results are still in L1 when read again.
  const std::int64_t rows_per_index = slab.size / (slab.extent[0] * slab.row_length);  // 0 in 1-D: one row in all
  const std::int64_t chunk = std::clamp<std::int64_t>(kLaneChunkBytes / (L * kAcc * per_index), 1, slab.band);

  // An input read through conversions (float16, or strides that are not whole elements) whose
  // planes are dense: a task converts the input its band reads, one run per channel (not one
  // per row and channel), into `converted`, then interleaves from there.
  bool dense_planes = !direct_in && in_strides[last] == std::int64_t{sizeof(T)};
  for (int a = 0; a < last; ++a) dense_planes = dense_planes && in_strides[a] == in_strides[a + 1] * g.in_spatial[a + 1];
  const std::int64_t inner = g.in_spatial.product() / g.in_spatial[0];  // input elements per axis-0 index
  const std::int64_t region_max = D == 1 ? slab.extent[0] : std::min(g.in_spatial[0], slab.extent[0]) * inner;

  parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    const Scratch<Acc> buffer(slab.size), result(chunk * per_index * L);
    const Scratch<Acc> weights(multiplier * taps * L), bias(multiplier * L);
    const Scratch<Acc> staging(direct_in && direct_out ? 0 : L * std::max(in_width, chunk * per_index));
    const Scratch<Acc> converted(dense_planes ? L * region_max : 0);
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t n = task / (blocks * slab.bands), block = task / slab.bands % blocks, b = task % slab.bands;
      const std::int64_t c0 = block * L, used = std::min(L, g.in_channels - c0);
      const std::int64_t o0 = b * slab.band, band = std::min(slab.band, g.out_spatial[0] - o0);

      // Pass m's weights [taps][L] and bias [L] (output channel (c0 + l) * multiplier + m in lane l).
      for (std::int64_t m = 0; m < multiplier; ++m) {
        const Acc* filters = filter_rows + (c0 * multiplier + m) * filter_ld;
        interleave_lanes(filters + (flip ? taps - 1 : 0), multiplier * filter_ld, flip ? -1 : 1, used, taps,
                         weights.get() + m * taps * L);
        if (v.bias) {
          for (std::int64_t l = 0; l < L; ++l) bias.get()[m * L + l] = l < used ? biases[(c0 + l) * multiplier + m] : Acc(0);
        }
      }

      // Slab row r (its indices on axes 0..D-2 from r): the input row's columns interleaved,
      // zeros around them (only there, so the scratch is never cleared first).
      const std::int64_t column0 = D == 1 ? o0 * g.strides[0] : 0;
      const std::int64_t first = std::clamp(start - column0, std::int64_t{0}, slab.columns);
      const std::int64_t stop = std::clamp(start - column0 + in_width, first, slab.columns);
      const std::byte* channels = in_base + n * v.in.byte_strides[0] + c0 * v.in.byte_strides[1];
      // The band's input, elements [region_first, region_first + region_size) of each plane.
      std::int64_t region_first = column0 + first - start, region_size = stop - first;
      if (D > 1) {
        const std::int64_t lo = std::clamp(o0 * g.strides[0] - g.start[0], std::int64_t{0}, g.in_spatial[0]);
        const std::int64_t hi = std::clamp(lo + slab.extent[0], lo, g.in_spatial[0]);
        region_first = lo * inner, region_size = (hi - lo) * inner;
      }
      if (dense_planes) {
        for (std::int64_t l = 0; l < used; ++l)
          load_run<T, Acc>(channels + l * v.in.byte_strides[1] + region_first * std::int64_t{sizeof(T)}, sizeof(T),
                           region_size, converted.get() + l * region_size);
      }
      const auto fill_row = [&](std::int64_t r) {
        Acc* dst = buffer.get() + r * slab.row_length;
        std::int64_t offset = (column0 + first - start) * in_strides[last];
        bool inside = true;
        for (int a = last - 1; a >= 0; --a) {
          const std::int64_t i = r % slab.extent[a] + (a == 0 ? o0 * g.strides[0] : 0) - g.start[a];
          r /= slab.extent[a];
          inside = inside && i >= 0 && i < g.in_spatial[a];
          offset += i * in_strides[a];
        }
        if (!inside) {
          std::fill_n(dst, slab.row_length, Acc(0));
          return;
        }
        std::fill_n(dst, first * L, Acc(0));
        std::fill(dst + stop * L, dst + slab.row_length, Acc(0));
        const std::byte* src = channels + offset;
        if (direct_in) {
          interleave_lanes(reinterpret_cast<const Acc*>(src), v.in.byte_strides[1] / kAcc, in_strides[last] / kAcc, used,
                           stop - first, dst + first * L);
          return;
        }
        if (dense_planes) {
          interleave_lanes(converted.get() + (offset / std::int64_t{sizeof(T)} - region_first), region_size, 1, used,
                           stop - first, dst + first * L);
          return;
        }
        for (std::int64_t l = 0; l < used; ++l)
          load_run<T, Acc>(src + l * v.in.byte_strides[1], in_strides[last], stop - first, staging.get() + l * (stop - first));
        interleave_lanes(staging.get(), stop - first, 1, used, stop - first, dst + first * L);
      };

      std::int64_t filled = 0;  // slab rows filled so far
      for (std::int64_t q0 = 0; q0 < band; q0 += chunk) {
        const std::int64_t q1 = std::min(band, q0 + chunk), count = (q1 - q0) * per_index;
        const std::int64_t needed =
            D == 1 ? 1 : ((q1 - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1) * rows_per_index;
        for (; filled < needed; ++filled) fill_row(filled);
        const std::int64_t p0 = (o0 + q0) * per_index;  // the chunk's first output position in the plane
        for (std::int64_t m = 0; m < multiplier; ++m) {
          lane_window_sum(taps, buffer.get(), slab.tap_offsets.data(), slab.positions.data() + q0 * per_index, count,
                          weights.get() + m * taps * L, v.bias ? bias.get() + m * L : nullptr, result.get());
          if (desc.fused_activation) apply_activation(*desc.fused_activation, result.get(), count * L);
          std::byte* planes = out_base + n * v.out.byte_strides[0] + (c0 * multiplier + m) * v.out.byte_strides[1];
          store_lanes<T, Acc>(result.get(), L, count, used, planes, multiplier * v.out.byte_strides[1], g, out_strides, p0,
                              direct_out, staging.get());
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// FORWARD, one input channel per group (depthwise, with any channel multiplier): no GEMM, whose
// 6-row tiles would be mostly padding. With enough channels, forward_depthwise_lanes; with fewer
// than half a vector of them (e.g. one input channel, many outputs), the vectors run along the
// rows instead. Per (n, input channel) task the input plane is copied once
// into a PaddedPlane; each output row is then a weighted_row_sum over one shifted source row per
// tap, summed in increasing tap order.

template <class T>
void forward_depthwise(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = typename AccumulatorOf<T>::type;
  // Enough channels to fill at least half of the vector lanes: the interleaved kernel.
  if (2 * g.in_channels >= lane_count<Acc>()) return forward_depthwise_lanes<T>(desc, g, v);
  const BlockWalker walker = forward_walker(g);
  const Taps tap(walker, v.filter);
  const std::int64_t taps = walker.tap_count();
  const bool flip = desc.mode == ConvolutionMode::Convolution;

  const PaddedPlane pad(g, tap, true);
  const std::int64_t out_width = pad.out_width, out_rows = std::ssize(pad.row_base);
  // With unit strides, output row r starts at row_base[r] and the rows follow each other in the
  // plane: the whole plane is one weighted_row_sum over flat_length plane positions, whose
  // columns past out_width (reading the padding) are dropped.
  const bool unit_strides = std::all_of(g.strides.begin(), g.strides.end(), [](std::int64_t s) { return s == 1; });
  const std::int64_t flat_length = pad.row_base.back() + out_width;

  const Dims in_strides = spatial(v.in.byte_strides), out_strides = spatial(v.out.byte_strides);
  const auto* in_base = static_cast<const std::byte*>(v.in.data);
  const auto* w = static_cast<const std::byte*>(v.filter.data);
  auto* out_base = static_cast<std::byte*>(v.out.data);
  const std::int64_t multiplier = g.out_per_group, tasks = g.batch * g.in_channels;
  const std::int64_t grain = std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, 2 * multiplier * taps * out_rows * out_width));
  parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    const Scratch<Acc> plane(pad.size);
    std::vector<Acc> line(static_cast<std::size_t>(pad.row_len));  // zero: see PaddedPlane::fill
    std::vector<Acc> weights = scratch<Acc>(taps), result = scratch<Acc>(unit_strides ? 0 : out_rows * out_width);
    std::vector<Acc> wide = scratch<Acc>(unit_strides ? flat_length : 0);
    std::vector<const Acc*> sources(static_cast<std::size_t>(taps));
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t n = task / g.in_channels, c = task % g.in_channels;
      pad.fill<T>(g, in_base + n * v.in.byte_strides[0] + c * v.in.byte_strides[1], 0, 1, in_strides, plane.get(), line.data());
      for (std::int64_t m = 0; m < multiplier; ++m) {
        const std::int64_t oc = c * multiplier + m;
        for (std::int64_t t = 0; t < taps; ++t)
          weights[t] = load_value<T, Acc>(w + oc * v.filter.byte_strides[0] + tap.filter(t, flip));
        const Acc bias = bias_of<T, Acc>(v.bias, oc);
        std::byte* out_plane = out_base + n * v.out.byte_strides[0] + oc * v.out.byte_strides[1];
        if (unit_strides) {  // every output row at once, as one long row (see above), stored row by row
          for (std::int64_t t = 0; t < taps; ++t) sources[t] = plane.get() + pad.tap_offset[t];
          weighted_row_sum(taps, sources.data(), weights.data(), flat_length, wide.data());
          if (out_width >= kLongRow) {
            for (std::int64_t row = 0; row < out_rows; ++row)
              finish_row<T, Acc>(wide.data() + pad.row_base[row], out_width, bias, desc.fused_activation, out_plane,
                                 g.out_spatial, out_strides, row * out_width);
            continue;
          }
          // Short rows: packed in place (row_base[row] >= row * out_width, so increasing rows
          // never overwrite a row not yet moved), then stored at once.
          for (std::int64_t row = 1; row < out_rows; ++row)
            std::memmove(wide.data() + row * out_width, wide.data() + pad.row_base[row], out_width * sizeof(Acc));
          finish_row<T, Acc>(wide.data(), out_rows * out_width, bias, desc.fused_activation, out_plane, g.out_spatial,
                             out_strides, 0);
          continue;
        }
        for (std::int64_t row = 0; row < out_rows; ++row) {
          for (std::int64_t t = 0; t < taps; ++t) sources[t] = plane.get() + pad.row_base[row] + pad.tap_offset[t];
          weighted_row_sum(taps, sources.data(), weights.data(), out_width, result.data() + row * out_width);
        }
        finish_row<T, Acc>(result.data(), out_rows * out_width, bias, desc.fused_activation, out_plane, g.out_spatial,
                           out_strides, 0);
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// BACKWARD

#if DMLOPS_X86
// dst[2j] += even[j] and dst[2j + 1] += odd[j] for j < n: two neighbouring taps of a stride-2
// layer interleaved into one contiguous run, sixteen sums per step.
DMLOPS_TARGET("avx2") void add_interleaved_avx2(const float* even, const float* odd, std::int64_t n,
                                                          float* dst) {
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = _mm256_loadu_ps(even + j), o = _mm256_loadu_ps(odd + j);
    // [e0 o0 e1 o1 | e4 o4 e5 o5] and [e2 o2 e3 o3 | e6 o6 e7 o7] -> e0 o0 .. e3 o3 and e4 o4 .. e7 o7
    const __m256 lo = _mm256_unpacklo_ps(e, o), hi = _mm256_unpackhi_ps(e, o);
    _mm256_storeu_ps(dst + 2 * j, _mm256_add_ps(_mm256_loadu_ps(dst + 2 * j), _mm256_permute2f128_ps(lo, hi, 0x20)));
    _mm256_storeu_ps(dst + 2 * j + 8,
                     _mm256_add_ps(_mm256_loadu_ps(dst + 2 * j + 8), _mm256_permute2f128_ps(lo, hi, 0x31)));
  }
  for (; j < n; ++j) {
    dst[2 * j] += even[j];
    dst[2 * j + 1] += odd[j];
  }
}
#endif

// add_row of two taps one apart on a stride-2 axis: dst[2j] += even[j], dst[2j + 1] += odd[j].
template <class Acc>
void scatter_add_pair(const Acc* even, const Acc* odd, std::int64_t n, Acc* dst) {
  if constexpr (std::is_same_v<Acc, float>) {
#if DMLOPS_X86
    if (avx2_enabled()) return add_interleaved_avx2(even, odd, n, dst);
#endif
  }
  for (std::int64_t j = 0; j < n; ++j) {
    dst[2 * j] += even[j];
    dst[2 * j + 1] += odd[j];
  }
}

template <class T>
void backward(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = typename AccumulatorOf<T>::type;
  constexpr std::int64_t NR = gemm_columns<Acc>();
  // The window slides over the output; `end` is chosen so that there is exactly one block per
  // input position (it is negative when the output is larger than the window reaches).
  std::vector<WindowAxis> axes(static_cast<std::size_t>(g.D));
  for (int a = 0; a < g.D; ++a) {
    WindowAxis& axis = axes[a];
    axis = WindowAxis{g.out_spatial[a], g.kernel[a], g.strides[a], g.dilations[a], g.start[a], 0};
    axis.end = (g.in_spatial[a] - 1) * g.strides[a] + g.extent[a] - g.out_spatial[a] - g.start[a];  // checked by analyse
  }
  const BlockWalker walker(std::move(axes));
  const std::int64_t taps = walker.tap_count(), positions = walker.block_count();
  const std::int64_t out_positions = g.out_spatial.product();
  const std::int64_t K = g.in_per_group;
  const bool flip = desc.mode == ConvolutionMode::Convolution;

  const AccFilter<T> acc_filter(g, v.filter);
  const TensorView& filter = acc_filter.view();
  const Taps tap(walker, filter);

  // A task sums into padded planes that hold every position a tap reaches (the output and the
  // margins that start padding and cropping cut off): then every (tap, input row) pair scatters
  // into one plain strided run, with no test for the borders, and the output is a box inside
  // (padded position q on axis a is output position q - start[a]). When the margins would be
  // large (an output cropped far inside the taps' reach, or strides that spread the taps far
  // apart) the planes are the output itself and the window walker drops what falls outside.
  Dims padded = Dims::filled(g.D, 0);
  std::int64_t plane_size = 1;
  bool margins = true;
  for (int a = 0; a < g.D && margins; ++a) {
    std::int64_t reach = 0;  // (in - 1) * stride + extent, unless that overflows (then no margins)
    margins = !mul_overflows(g.in_spatial[a] - 1, g.strides[a], &reach) &&
              !add_overflows(reach, g.extent[a], &reach);
    padded[a] = std::max(g.out_spatial[a], reach - g.start[a]) + g.start[a];
    margins = margins && !mul_overflows(plane_size, padded[a], &plane_size);
  }
  margins = margins && plane_size <= 2 * out_positions + kMarginSlack;
  if (!margins) padded = g.out_spatial;
  plane_size = padded.product();
  const Dims padded_strides = packed_strides(padded);
  Dims in_to_padded = Dims::filled(g.D, 0);
  for (int a = 0; a < g.D; ++a) in_to_padded[a] = g.strides[a] * padded_strides[a];
  std::vector<std::int64_t> tap_offset(static_cast<std::size_t>(taps));
  for (std::int64_t t = 0; t < taps; ++t) {
    for (int a = 0; a < g.D; ++a) tap_offset[t] += tap.index[t][a] * g.dilations[a] * padded_strides[a];
  }
  const int last = g.D - 1;
  const std::int64_t last_stride = g.strides[last], last_kernel = g.kernel[last];
  // Neighbouring taps of a stride-2, undilated last axis fill the two halves of one contiguous
  // run: they are added together (scatter_add_pair).
  const bool pairs = last_stride == 2 && g.dilations[last] == 1;
  std::int64_t out_offset = 0;  // where output position 0 lies in a padded plane
  for (int a = 0; a < g.D && margins; ++a) out_offset += g.start[a] * padded_strides[a];
  const std::int64_t out_width = g.out_spatial[last], out_rows = out_positions / out_width;

  // Output channels per task: the accumulator planes fit kPlaneBytes, and there are enough
  // tasks for every thread when the channels allow it.
  const std::int64_t plane_bytes = plane_size * static_cast<std::int64_t>(sizeof(Acc));
  std::int64_t per_task = std::clamp<std::int64_t>(kPlaneBytes / plane_bytes, 1, g.out_per_group);
  per_task = std::max<std::int64_t>(1, std::min(per_task, ceil_div(g.batch * g.groups * g.out_per_group,
                                                                    4 * static_cast<std::int64_t>(num_threads()))));
  const std::int64_t chunks = ceil_div(g.out_per_group, per_task), tasks = g.batch * g.groups * chunks;
  const std::int64_t fit = std::max<std::int64_t>(NR, kBackwardPanelBytes / (K * static_cast<std::int64_t>(sizeof(Acc))) / NR * NR);
  const std::int64_t block = std::min(fit, round_up(positions, NR));
  const std::int64_t grain =
      std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, per_task * taps * K * positions));

  const Dims in_strides = spatial(v.in.byte_strides), out_strides = spatial(v.out.byte_strides);
  const auto* in_base = static_cast<const std::byte*>(v.in.data);
  const auto* w = static_cast<const std::byte*>(filter.data);
  auto* out_base = static_cast<std::byte*>(v.out.data);
  // Row ic of the input panel of (n, group) for input positions [p0, p0 + count), in Acc
  // (`row`: block values of scratch), zero-padded to `width` columns.
  const auto pack_input_row = [&](std::int64_t n, std::int64_t grp, std::int64_t ic, std::int64_t p0, std::int64_t count,
                                  std::int64_t width, Acc* row, Acc* panel) {
    const std::byte* plane = in_base + n * v.in.byte_strides[0] + (grp * K + ic) * v.in.byte_strides[1];
    for_each_run(g.in_spatial, in_strides, p0, count, [&](std::int64_t offset, std::int64_t first, std::int64_t len) {
      load_run<T, Acc>(plane + offset, in_strides[g.D - 1], len, row + first);
    });
    std::fill(row + count, row + width, Acc(0));
    pack_gemm_b_row(panel, K, ic, row, width);
  };
  // When one block holds every input position (a small input, e.g. a transposed layer
  // upsampling a coarse map), each (n, group)'s panel is packed once, up front, by all threads,
  // and shared by its tasks (else every task would pack the same panel again), unless those
  // panels together outgrow kSharedPanelBytes (a large batch); otherwise each task packs its
  // blocks as it goes.
  const bool shared_panels =
      positions <= block && g.batch * g.groups * K * block * std::int64_t{sizeof(Acc)} <= kSharedPanelBytes;
  const Scratch<Acc> shared(shared_panels ? g.batch * g.groups * K * block : 0);
  if (shared_panels) {
    parallel_for(0, g.batch * g.groups * K, std::max<std::int64_t>(1, (1 << 14) / block), [&](std::int64_t begin, std::int64_t end) {
      std::vector<Acc> row(static_cast<std::size_t>(block));
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t panel = i / K;
        pack_input_row(panel / g.groups, panel % g.groups, i % K, 0, positions, block, row.data(), shared.get() + panel * K * block);
      }
    });
  }
  parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t M_max = round_up(per_task * taps, kGemmRows);
    const Scratch<Acc> packed(M_max * K), own_panel(shared_panels ? 0 : K * block);
    const Scratch<Acc> result(M_max * block);
    const Scratch<Acc> sums(per_task * plane_size + 1);  // + 1: add_row's slack
    std::vector<Acc> row(static_cast<std::size_t>(shared_panels ? 0 : block));
    std::vector<std::int64_t> row_offset(static_cast<std::size_t>(M_max));
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t n = task / (g.groups * chunks), grp = task / chunks % g.groups;
      const std::int64_t oc0 = task % chunks * per_task, ocs = std::min(per_task, g.out_per_group - oc0);
      const std::int64_t M = ocs * taps, M_pad = round_up(M, kGemmRows);
      // A: row (oc', t), column ic holds W[ic, oc0 + oc', t'] (the rows' byte offsets first: no
      // division per element).
      for (std::int64_t r = 0; r < M; ++r)
        row_offset[r] = (oc0 + r / taps) * filter.byte_strides[1] + tap.filter(r % taps, flip);
      const std::byte* group_filter = w + grp * K * filter.byte_strides[0];
      // A column (one input channel's rows) that is a contiguous run of Acc (a dense filter of
      // Acc in cross-correlation mode) is copied a panel's rows at a time; else gathered.
      bool contiguous = aligned(group_filter + row_offset[0], alignof(Acc)) &&
                        filter.byte_strides[0] % std::int64_t{sizeof(Acc)} == 0;
      for (std::int64_t r = 1; r < M && contiguous; ++r)
        contiguous = row_offset[r] == row_offset[0] + r * std::int64_t{sizeof(Acc)};
      if (contiguous) {
        pack_gemm_a_columns(M, K,
                            [&](std::int64_t ic) {
                              return reinterpret_cast<const Acc*>(group_filter + ic * filter.byte_strides[0] + row_offset[0]);
                            },
                            packed.get());
      } else {
        pack_gemm_a(M, K,
                    [&](std::int64_t r, std::int64_t ic) {
                      return load_value<Acc, Acc>(group_filter + ic * filter.byte_strides[0] + row_offset[r]);
                    },
                    packed.get());
      }
      std::fill_n(sums.get(), ocs * plane_size + 1, Acc(0));
      for (std::int64_t p0 = 0; p0 < positions; p0 += block) {
        const std::int64_t count = std::min(block, positions - p0), width = round_up(count, NR);
        const Acc* panel = shared_panels ? shared.get() + (n * g.groups + grp) * K * block : own_panel.get();
        if (!shared_panels) {
          for (std::int64_t ic = 0; ic < K; ++ic) pack_input_row(n, grp, ic, p0, count, width, row.data(), own_panel.get());
        }
        gemm_packed(M_pad, width, K, packed.get(), panel, result.get(), width);
        if (!margins) {
          for (std::int64_t oc = 0; oc < ocs; ++oc) {
            for (std::int64_t t = 0; t < taps; ++t) {
              const Acc* cols = result.get() + (oc * taps + t) * width;
              walker.walk_span(
                  tap.index[t], p0, p0 + count, padded_strides, /*base_offset=*/oc * plane_size,
                  [](std::int64_t, std::int64_t) {},  // outside the output: dropped
                  [&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t len) {
                    add_row(sums.get() + offset, step, cols + (col - p0), len);
                  });
            }
          }
          continue;
        }
        // Input positions [p0, p0 + count) row by row: input (i_0, .., i_last) reaches padded
        // position i * stride + tap * dilation; sums run in a fixed order (blocks, rows, taps).
        for_each_run(g.in_spatial, in_to_padded, p0, count, [&](std::int64_t offset, std::int64_t first, std::int64_t len) {
          for (std::int64_t oc = 0; oc < ocs; ++oc) {
            const Acc* cols = result.get() + oc * taps * width + first;
            Acc* dst = sums.get() + oc * plane_size + offset;
            for (std::int64_t t = 0; t < taps; ++t) {
              if (pairs && tap.index[t][last] + 1 < last_kernel) {
                scatter_add_pair(cols + t * width, cols + (t + 1) * width, len, dst + tap_offset[t]);
                ++t;
              } else {
                add_row(dst + tap_offset[t], last_stride, cols + t * width, len);
              }
            }
          }
        });
      }
      for (std::int64_t oc = 0; oc < ocs; ++oc) {
        const std::int64_t channel = grp * g.out_per_group + oc0 + oc;
        std::byte* out_plane = out_base + n * v.out.byte_strides[0] + channel * v.out.byte_strides[1];
        for (std::int64_t out_row = 0; out_row < out_rows; ++out_row) {
          std::int64_t offset = out_offset, rest = out_row;  // where the output row lies in the padded plane
          for (int a = last - 1; a >= 0; --a) {
            offset += rest % g.out_spatial[a] * padded_strides[a];
            rest /= g.out_spatial[a];
          }
          finish_row<T, Acc>(sums.get() + oc * plane_size + offset, out_width, bias_of<T, Acc>(v.bias, channel),
                             desc.fused_activation, out_plane, g.out_spatial, out_strides, out_row * out_width);
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// BACKWARD of an undilated layer as stride^D forward convolutions, one per output phase.
//
// On an axis with stride s, output Y receives x[i] * w[k] for i * s + k = Y + start. The
// outputs of phase q < s, Y = q + s * j, all have (Y + start) mod s = r = (q + start) mod s, so
// they meet only the taps k = r + s * m (m < M = ceil((K - r) / s)), and with c = (q + start) div s
//   y[q + s * j] = sum over m < M of x[j + c - m] * w[r + s * m]
//                = sum over u < M of x[j + c - (M - 1) + u] * f[u],   f[u] = w[r + s * (M - 1 - u)]:
// a stride-1 forward cross-correlation over x of the M-tap filter f (w's taps with element
// step -s; +s from the mirrored tap in convolution mode), with start padding M - 1 - c (or,
// when that is negative, the input view beginning c - (M - 1) further on), end padding for
// J = ceil((out - q) / s) outputs, written into the view of y that begins at q with steps
// times s. The phases' forward filters {OutC, InC/G, M...} are made from the backward one
// {InC, OutC/G, K...} (axes 0 and 1 swapped, the phase's taps picked) in one pass. Each output
// is then one forward sum (in the forward kernels' fixed order: independent of the thread
// count), with no col2im scatter, no accumulator planes and no multiplication by inserted
// zeros. A phase that no tap reaches (K < s) or whose outputs lie past every input (an output
// larger than nominal) holds the bias and activation of zero.

// One axis of one phase.
struct PhaseAxis {
  std::int64_t outputs = 0;                        // J
  std::int64_t taps = 0;                           // M; 0 when no input reaches the phase
  std::int64_t in_first = 0, inputs = 0;           // the input view: [in_first, in_first + inputs)
  std::int64_t start = 0, end = 0;                 // the forward paddings
  std::int64_t filter_first = 0, filter_step = 0;  // the backward tap of forward tap 0, then the step

  PhaseAxis(const Geometry& g, int a, std::int64_t q, bool flip) {
    const std::int64_t s = g.strides[a], K = g.kernel[a];
    outputs = q < g.out_spatial[a] ? ceil_div(g.out_spatial[a] - q, s) : 0;
    const std::int64_t r = (q + g.start[a]) % s, c = (q + g.start[a]) / s;
    taps = r < K ? ceil_div(K - r, s) : 0;
    const std::int64_t lo = c - (taps - 1);  // the input output 0's forward tap 0 reads
    in_first = std::max<std::int64_t>(lo, 0);
    start = in_first - lo;
    inputs = std::min(g.in_spatial[a], c + outputs) - in_first;  // up to output J - 1's last tap, c + J - 1
    if (outputs == 0 || taps == 0 || inputs <= 0) {
      taps = 0;
      return;
    }
    end = outputs - 1 + taps - start - inputs;
    const std::int64_t last = r + s * (taps - 1);  // the backward tap forward tap 0 multiplies
    filter_first = flip ? K - 1 - last : last;
    filter_step = flip ? s : -s;
  }
};

constexpr std::int64_t kMaxPhases = 64;       // more phases (strides) than this stay with the scatter
constexpr std::int64_t kMinPhaseOutputs = 512;  // batch x output positions per phase, at least

// Layers the phases compute faster than the scatter (measured, float32): undilated and strided,
// with few phases, a window wider than the stride on some axis and a vector of output channels
// per group (so that the phases' forward layers run direct), and at least kMinPhaseOutputs
// outputs per phase and channel: below that (e.g. a 4x4 stride-2 layer onto 32 x 32, 256 per
// phase), the phases' per-call costs (filter passes, padded planes, one product per phase)
// cost as much as the scatter and its GEMM's larger panels save.
bool phases_apply(const Geometry& g) {
  std::int64_t phases = 1;
  bool window = false;
  for (int a = 0; a < g.D; ++a) {
    if (g.dilations[a] != 1 || g.strides[a] > kMaxPhases) return false;
    phases *= std::min(g.strides[a], g.out_spatial[a]);
    window = window || g.kernel[a] > g.strides[a];
  }
  return phases > 1 && phases <= kMaxPhases && window && g.out_per_group >= simd_lanes<float>() &&
         g.batch * g.out_spatial.product() >= kMinPhaseOutputs * phases;
}

// The padded planes hold (out - 1) * stride + extent positions per axis; the output reads only
// out * K of them (K taps per output). With large strides, dilations and paddings the planes would
// be mostly positions no output reads (a 4-row input with stride and padding 2^24: 2^25 padded
// rows for 3 output rows; a 3-tap filter dilated by 2^31: 2^32 rows for one output), so when they
// would be much larger than that, such axes are rewritten: the input becomes a compact copy
// holding, per output, the K positions its taps read (zeros where they read padding), which an
// undilated window then walks with stride K and no padding. The copy moves values as they are
// (bit for bit), and its size is bounded by what the output reads. Empty when that saves little.
std::optional<Geometry> compact_geometry(const Geometry& g) {
  constexpr std::int64_t kSaturated = INT64_MAX;
  const auto times = [](std::int64_t a, std::int64_t b) {
    std::int64_t p = 0;
    return mul_overflows(a, b, &p) ? kSaturated : p;
  };
  // A padded row splits into `stride` phases, so it is at least a stride long: a last axis with
  // one output and a stride past its extent is always rewritten (its compact row is K long).
  const int last = g.D - 1;
  const bool long_row = g.out_spatial[last] == 1 && g.strides[last] > g.extent[last];
  std::int64_t padded = 1, compact = 1;
  Geometry c = g;
  bool rewritten = false;
  for (int a = 0; a < g.D; ++a) {
    // Within 2^62 + 2^41: (out - 1) * stride <= in + start + end - extent.
    const std::int64_t reach = (g.out_spatial[a] - 1) * g.strides[a] + g.extent[a];
    const std::int64_t reads = times(g.out_spatial[a], g.kernel[a]);
    padded = times(padded, reach);
    if (reads >= reach && !(long_row && a == last)) {
      compact = times(compact, reach);
      continue;
    }
    rewritten = true;
    compact = times(compact, reads);
    c.in_spatial[a] = reads;
    c.strides[a] = c.extent[a] = g.kernel[a];
    c.dilations[a] = 1;
    c.start[a] = c.end[a] = 0;
  }
  if (!rewritten || (!long_row && padded / 4 <= compact + kMarginSlack)) return {};
  return c;
}

// The compact input of compact_geometry(): {N, C, c.in_spatial...}, packed, in `buffer`.
TensorView compact_input(const Geometry& g, const Geometry& c, const TensorView& in, std::vector<std::byte>& buffer) {
  const std::int64_t item = static_cast<std::int64_t>(element_size(in.dtype));
  TensorView view{in.dtype, {g.batch, g.in_channels}, {}, nullptr};
  for (std::int64_t s : c.in_spatial) view.sizes.push_back(s);
  buffer.assign(static_cast<std::size_t>(checked_mul(view.element_count(), item, kOp, ": the compact input's bytes")),
                std::byte{0});
  view.byte_strides = packed_strides(view.sizes);
  for (std::int64_t& stride : view.byte_strides) stride *= item;
  view.data = buffer.data();
  // The input index of compact position q on axis a (tap q % K of output q / K on a rewritten
  // axis; q itself on the others), or -1 in the padding. An axis whose parameters are unchanged
  // maps q to q either way.
  const auto source = [&](int a, std::int64_t q) -> std::int64_t {
    const bool rewritten = c.in_spatial[a] != g.in_spatial[a] || c.strides[a] != g.strides[a] ||
                           c.dilations[a] != g.dilations[a] || c.start[a] != g.start[a];
    const std::int64_t K = g.kernel[a];
    const std::int64_t i = rewritten ? q / K * g.strides[a] + q % K * g.dilations[a] - g.start[a] : q;
    return i >= 0 && i < g.in_spatial[a] ? i : -1;
  };
  const int rank = view.sizes.size();
  Dims index = Dims::filled(rank, 0);
  for (std::int64_t e = 0, count = view.element_count(); e < count; ++e) {
    std::int64_t offset = 0;
    bool inside = true;
    for (int d = 0; d < rank && inside; ++d) {
      const std::int64_t i = d < 2 ? index[d] : source(d - 2, index[d]);
      inside = i >= 0;
      offset += i * in.byte_strides[d];
    }
    if (inside) std::memcpy(buffer.data() + e * item, static_cast<const std::byte*>(in.data) + offset, item);
    for (int d = rank - 1; d >= 0 && ++index[d] == view.sizes[d]; --d) index[d] = 0;
  }
  return view;
}

template <class T>
void forward_any(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  if (const auto c = compact_geometry(g)) {
    std::vector<std::byte> buffer;
    const TensorView in = compact_input(g, *c, v.in, buffer);
    return forward_any<T>(desc, *c, Views{in, v.filter, v.bias, v.out});
  }
  if (g.in_per_group == 1) return forward_depthwise<T>(desc, g, v);
  forward<T>(desc, g, v);
}

// Every element of `out` ({N, OutC, ...}) set to its channel's bias, then the activation.
template <class T>
void fill_bias(const ConvolutionDesc& desc, const TensorView* bias, const TensorView& out) {
  using Acc = typename AccumulatorOf<T>::type;
  const Dims sizes = spatial(out.sizes), strides = spatial(out.byte_strides);
  const std::int64_t positions = sizes.product(), channels = out.sizes[1];
  parallel_for(0, out.sizes[0] * channels, std::max<std::int64_t>(1, (1 << 14) / positions),
               [&](std::int64_t begin, std::int64_t end) {
                 std::vector<Acc> row(static_cast<std::size_t>(positions));
                 for (std::int64_t i = begin; i < end; ++i) {
                   const std::int64_t n = i / channels, oc = i % channels;
                   std::fill(row.begin(), row.end(), Acc(0));
                   finish_row<T, Acc>(row.data(), positions, bias_of<T, Acc>(bias, oc), desc.fused_activation,
                                      static_cast<std::byte*>(out.data) + n * out.byte_strides[0] + oc * out.byte_strides[1],
                                      sizes, strides, 0);
                 }
               });
}

template <class T>
void backward_phases(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  const int D = g.D;
  const bool flip = desc.mode == ConvolutionMode::Convolution;
  const std::int64_t kernel_taps = g.kernel.product();
  const Dims kernel_strides = packed_strides(g.kernel);  // W's taps, row-major
  struct Phase {
    Dims q;                             // its first output, per axis
    std::vector<PhaseAxis> axes;
    bool reached = true;                // by some input through some tap (else: the bias only)
    std::int64_t taps = 1, filter = 0;  // its forward filter: taps per channel pair, where it starts
  };
  std::vector<Phase> phases;
  std::int64_t filter_size = 0;
  // Per tap of W (row-major), where its row of output channels goes in the phases' filters, and
  // the step per input channel; -1: a tap no phase uses (in a phase no input reaches).
  std::vector<std::int64_t> destination(static_cast<std::size_t>(kernel_taps), -1), channel_step(destination);
  for (Dims q = Dims::filled(D, 0);;) {
    Phase& p = phases.emplace_back(Phase{.q = q, .axes = {}, .filter = filter_size});
    std::vector<std::int64_t> source{0};  // per forward tap u (row-major), W's tap
    for (int a = 0; a < D; ++a) {
      const PhaseAxis& axis = p.axes.emplace_back(g, a, q[a], flip);
      p.reached = p.reached && axis.taps > 0;
      p.taps *= axis.taps;
      std::vector<std::int64_t> longer;  // the taps so far, then axis a's
      for (std::int64_t tap : source) {
        for (std::int64_t u = 0; u < axis.taps; ++u)
          longer.push_back(tap + (axis.filter_first + u * axis.filter_step) * kernel_strides[a]);
      }
      source = std::move(longer);
    }
    if (p.reached) {
      for (std::int64_t u = 0; u < p.taps; ++u) {
        destination[source[u]] = p.filter + u * g.out_channels;
        channel_step[source[u]] = p.taps * g.out_channels;
      }
      filter_size += g.out_channels * g.in_per_group * p.taps;
    }
    int a = D - 1;
    for (; a >= 0 && ++q[a] == std::min(g.strides[a], g.out_spatial[a]); --a) q[a] = 0;
    if (a < 0) break;
  }

  // Every phase's forward filter {OutC, InC/G, M...} laid out as [ic'][u][oc]: F[g * OCg + oc',
  // ic', u] = W[g * ICg + ic', oc', the tap forward tap u multiplies] at (ic' * M + u) * OutC + g
  // * OCg + oc'. Each output channel's weights are then strided, but the direct kernels' packing
  // reads a tap's output channels as one contiguous run (FilterMatrix::gather_columns), and the
  // phases' filters are made in one pass over W: per input channel, its {OCg, taps} block of W
  // transposed (pack_direct_filter's 8 x 8 transposes when it is dense float; else value by
  // value), then each tap's row of output channels copied where it goes. (Each phase picking its
  // own taps out of W would bring all of W's cache lines in once per phase, and a layout with
  // each output channel's weights together would have to be gathered value by value.)
  const Scratch<T> filters(filter_size);
  const std::int64_t w0 = v.filter.byte_strides[0], w1 = v.filter.byte_strides[1];
  std::vector<std::int64_t> tap_offset(static_cast<std::size_t>(kernel_taps));  // bytes, within W[ic, oc']
  for (std::int64_t t = 0; t < kernel_taps; ++t) {
    for (int a = 0; a < D; ++a) tap_offset[t] += t / kernel_strides[a] % g.kernel[a] * v.filter.byte_strides[2 + a];
  }
  bool dense_taps = std::is_same_v<T, float> && aligned(v.filter.data, alignof(float)) && w0 % 4 == 0 && w1 % 4 == 0;
  for (std::int64_t t = 0; t < kernel_taps; ++t) dense_taps = dense_taps && tap_offset[t] == t * 4;
  const std::int64_t OCg = g.out_per_group;
  parallel_for(0, g.in_channels, std::max<std::int64_t>(1, (1 << 14) / (OCg * kernel_taps)), [&](std::int64_t begin, std::int64_t end) {
    std::vector<T> block(static_cast<std::size_t>(kernel_taps * OCg));  // [tap][oc']
    for (std::int64_t ic = begin; ic < end; ++ic) {
      const std::byte* src = static_cast<const std::byte*>(v.filter.data) + ic * w0;
      if constexpr (std::is_same_v<T, float>) {
        if (dense_taps) {
          pack_direct_filter(reinterpret_cast<const float*>(src), w1 / 4, OCg, kernel_taps, OCg, block.data());
        }
      }
      if (!dense_taps) {
        for (std::int64_t t = 0; t < kernel_taps; ++t) {
          for (std::int64_t o = 0; o < OCg; ++o) block[t * OCg + o] = load<T>(src + o * w1 + tap_offset[t]);
        }
      }
      const std::int64_t grp = ic / g.in_per_group, ic_in_group = ic % g.in_per_group;
      for (std::int64_t t = 0; t < kernel_taps; ++t) {
        if (destination[t] < 0) continue;
        std::memcpy(filters.get() + destination[t] + ic_in_group * channel_step[t] + grp * OCg, block.data() + t * OCg,
                    static_cast<std::size_t>(OCg) * sizeof(T));
      }
    }
  });

  ConvolutionDesc forward_desc = desc;
  forward_desc.mode = ConvolutionMode::CrossCorrelation;  // the filters carry the flip
  forward_desc.direction = ConvolutionDirection::Forward;
  // One phase after the other, each with every thread. (Equal phases side by side, one per
  // thread, measured no faster.)
  for (const Phase& p : phases) {
    // The phase's outputs: a view of y beginning at q, steps times the strides.
    TensorView out = v.out;
    for (int a = 0; a < D; ++a) {
      out.sizes[2 + a] = p.axes[a].outputs;
      out.data = static_cast<std::byte*>(out.data) + p.q[a] * v.out.byte_strides[2 + a];
      out.byte_strides[2 + a] *= g.strides[a];
    }
    if (!p.reached) {
      fill_bias<T>(desc, v.bias, out);
      continue;
    }
    Geometry f = g;
    f.strides = f.dilations = Dims::filled(D, 1);
    f.output_padding = Dims::filled(D, 0);
    TensorView in = v.in, filter = v.filter;
    filter.sizes[0] = g.out_channels, filter.sizes[1] = g.in_per_group;
    filter.data = filters.get() + p.filter;
    std::int64_t tap_step = g.out_channels;  // entries between consecutive taps on axis a
    for (int a = D - 1; a >= 0; --a) {
      const PhaseAxis& axis = p.axes[a];
      f.in_spatial[a] = in.sizes[2 + a] = axis.inputs;
      f.out_spatial[a] = axis.outputs;
      f.kernel[a] = filter.sizes[2 + a] = axis.taps;
      f.start[a] = axis.start, f.end[a] = axis.end;
      in.data = static_cast<std::byte*>(in.data) + axis.in_first * v.in.byte_strides[2 + a];
      filter.byte_strides[2 + a] = tap_step * std::int64_t{sizeof(T)};
      tap_step *= axis.taps;
    }
    filter.byte_strides[0] = sizeof(T);
    filter.byte_strides[1] = tap_step * std::int64_t{sizeof(T)};
    f.output = TensorDesc{out.dtype, out.sizes, std::nullopt};
    forward_any<T>(forward_desc, f, Views{in, filter, v.bias, out});
  }
}

}  // namespace

std::string_view name(ConvolutionMode mode) { return kModeNames[static_cast<int>(mode)]; }
std::string_view name(ConvolutionDirection direction) { return kDirectionNames[static_cast<int>(direction)]; }

ConvolutionMode parse_convolution_mode(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kModeNames); ++i) {
    if (text == kModeNames[i]) return static_cast<ConvolutionMode>(i);
  }
  fail(kOp, ": mode '", text, "' is unknown; expected one of cross_correlation, convolution");
}

ConvolutionDirection parse_convolution_direction(std::string_view text) {
  for (std::size_t i = 0; i < std::size(kDirectionNames); ++i) {
    if (text == kDirectionNames[i]) return static_cast<ConvolutionDirection>(i);
  }
  fail(kOp, ": direction '", text, "' is unknown; expected one of forward, backward");
}

TensorDesc infer_output(const ConvolutionDesc& desc) { return analyse(desc).output; }

void execute(const ConvolutionDesc& desc, const TensorView& in, const TensorView& filter, const TensorView* bias,
             const TensorView& out) {
  const Geometry g = analyse(desc);
  check_view_matches(in, desc.input, "Convolution: input");
  check_view_matches(filter, desc.filter, "Convolution: filter");
  if (bool(bias) != desc.bias.has_value())
    fail(kOp, ": the descriptor ", desc.bias ? "has" : "has no", " bias tensor but the call passes ", bias ? "one" : "none");
  if (bias) check_view_matches(*bias, *desc.bias, "Convolution: bias");
  if (bias) {
    check_output_view(out, g.output, "Convolution: out", {&in, &filter, bias});
  } else {
    check_output_view(out, g.output, "Convolution: out", {&in, &filter});
  }
  const Views views{in, filter, bias, out};
  visit_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half>) {
      if (desc.direction == ConvolutionDirection::Forward) {
        forward_any<T>(desc, g, views);
      } else if (std::is_same_v<T, float> && phases_apply(g)) {
        backward_phases<T>(desc, g, views);
      } else {
        backward<T>(desc, g, views);
      }
    }
  });
}

}  // namespace dmlops
