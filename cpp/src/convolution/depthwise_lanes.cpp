// FORWARD, one input channel per group, L input channels at a time in the vector lanes
// (core/lanes.hpp, L = lane_count<Acc>()). A task is (n, block of L input channels, band of
// output indices along the first spatial axis). It interleaves the block's input into a
// zero-padded slab [padded axis 0 range of the band][padded axes 1..D-1][L] holding every
// window of the band; then each output position is one lane_window_sum over the taps (one
// vector FMA per tap for L channels, whatever the stride or dilation, no border tests), the
// bias is added in the lanes, the activation runs over the interleaved results, and they are
// deinterleaved into the output: directly for planes of Acc with element strides, else into
// channel rows stored by finish_row. With a channel multiplier, pass m of a block computes output
// channels (c0 + l) * multiplier + m from the same slab. Bands keep the slab in L2 (slab_bytes())
// and give every thread tasks; an output's sum is the same in any band, so results do not
// depend on the thread count.
#include <algorithm>
#include <vector>

#include "algorithms.hpp"
#include "common.hpp"
#include "dmlops/core/lanes.hpp"

namespace dmlops::conv {
namespace {

// A task's interleaved input slab stays in L2 (a sixteenth: 64 KiB on Zen 4 and 5, where it was
// tuned); the results computed at once stay in L1 (half of it: 16 KiB on Zen 4).
std::int64_t slab_bytes() { return platform::cache_sizes().l2 / 16; }
std::int64_t lane_chunk_bytes() { return platform::cache_sizes().l1d / 2; }

struct LaneSlab {
  std::int64_t band = 1, bands = 1, band_positions = 0, size = 0;  // band: axis-0 output indices per band
  Dims extent, strides;                    // the slab of a whole band, per axis; strides in elements
  std::vector<std::int64_t> tap_offsets;   // per window tap, in the slab
  std::vector<std::int64_t> positions;     // per output position of a whole band: its window in the slab
  std::int64_t row_length = 0, columns = 0;  // elements per slab row (axes 0..D-2 fixed) and padded columns
  std::int64_t chunk = 0;                    // axis-0 indices computed at once (see run_typed)

  LaneSlab(const Geometry& g, const BlockWalker& walker, std::int64_t L, std::int64_t element_bytes, std::int64_t blocks) {
    const int D = g.D, last = D - 1;
    std::int64_t per_index = L;  // slab elements per axis-0 index
    for (int a = 1; a < D; ++a) per_index *= (g.out_spatial[a] - 1) * g.strides[a] + (g.kernel[a] - 1) * g.dilations[a] + 1;
    const std::int64_t reach0 = (g.kernel[0] - 1) * g.dilations[0] + 1, out0 = g.out_spatial[0];
    const std::int64_t fit = std::max<std::int64_t>(1, (slab_bytes() / element_bytes / per_index - reach0) / g.strides[0] + 1);
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
    for (std::int64_t t = 0; t < walker.tap_count(); ++t) {
      const Dims index = walker.tap(t);
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
    chunk = std::clamp<std::int64_t>(lane_chunk_bytes() / (L * element_bytes * (band_positions / band)), 1, band);
  }
};

template <class T>
void run_typed(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = typename AccumulatorOf<T>::type;
  const int D = g.D, last = D - 1;
  const std::int64_t L = lane_count<Acc>(), blocks = ceil_div(g.in_channels, L);
  const BlockWalker walker = forward_walker(g);
  const AccFilter<T> acc_filter(v.filter);
  const TensorView& filter = acc_filter.view();
  const Taps tap(walker, filter);
  const std::int64_t taps = walker.tap_count();
  const bool flip = desc.mode == ConvolutionMode::Convolution;
  const LaneSlab slab(g, walker, L, sizeof(Acc), blocks);
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
  const std::int64_t chunk = slab.chunk;

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

// Depthwise layers; preferred with enough channels to fill at least half of the vector lanes.
Verdict applies(const Geometry& g, const Cpu& cpu) {
  if (g.direction != ConvolutionDirection::Forward) return {false, "a forward algorithm"};
  if (g.in_per_group != 1) return {false, "not depthwise (" + std::to_string(g.in_per_group) + " input channels per group)"};
  const std::int64_t lanes = cpu.lanes(g.dtype);
  if (2 * g.in_channels < lanes)
    return {true, std::to_string(g.in_channels) + " channels fill less than half of the " + std::to_string(lanes) +
                      " vector lanes", false};
  return {true, "depthwise, channels in the " + std::to_string(lanes) + " vector lanes"};
}

void describe(const Geometry& g, ConvolutionPlan& plan) {
  visit_float(g.dtype, [&](auto tag) {
    using Acc = typename AccumulatorOf<typename decltype(tag)::type>::type;
    const std::int64_t L = lane_count<Acc>(), blocks = ceil_div(g.in_channels, L);
    const LaneSlab slab(g, forward_walker(g), L, sizeof(Acc), blocks);
    plan.tiles = {{"lanes", L}, {"channel_blocks", blocks}, {"bands", slab.bands}, {"band", slab.band},
                  {"chunk", slab.chunk}, {"slab_elements", slab.size}};
    plan.tasks = g.batch * blocks * slab.bands;
  });
}

void run(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  visit_float(g.dtype, [&](auto tag) { run_typed<typename decltype(tag)::type>(desc, g, v); });
}

}  // namespace

const Algorithm kDepthwiseLanes{"depthwise_lanes", applies, describe, run, nullptr};

}  // namespace dmlops::conv
