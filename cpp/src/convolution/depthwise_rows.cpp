// FORWARD, one input channel per group (depthwise, with any channel multiplier): no GEMM, whose
// 6-row tiles would be mostly padding, and the vectors along the rows (for layers with fewer
// channels than half a vector: e.g. one input channel, many outputs; see depthwise_lanes.cpp).
// Per (n, input channel) task the input plane is copied once into a PaddedPlane; each output row
// is then a weighted_row_sum over one shifted source row per tap, summed in increasing tap order.
#include <algorithm>
#include <vector>

#include "algorithms.hpp"
#include "common.hpp"
#include "dmlops/core/gemm.hpp"

namespace dmlops::conv {
namespace {

constexpr std::int64_t kLongRow = 32;  // depthwise output rows this long are stored one by one, not moved first

template <class T>
void run_typed(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = typename AccumulatorOf<T>::type;
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

Verdict applies(const Geometry& g, const Cpu&) {
  if (g.direction != ConvolutionDirection::Forward) return {false, "a forward algorithm"};
  if (g.in_per_group != 1) return {false, "not depthwise (" + std::to_string(g.in_per_group) + " input channels per group)"};
  return {true, "depthwise, vectors along the output rows"};
}

void describe(const Geometry& g, ConvolutionPlan& plan) {
  plan.tiles = {{"multiplier", g.out_per_group}, {"row", g.out_spatial[g.D - 1]}};
  plan.tasks = g.batch * g.in_channels;
}

void run(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  visit_float(g.dtype, [&](auto tag) { run_typed<typename decltype(tag)::type>(desc, g, v); });
}

}  // namespace

const Algorithm kDepthwiseRows{"depthwise_rows", applies, describe, run, nullptr};

}  // namespace dmlops::conv
