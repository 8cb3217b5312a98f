// Convolution internals shared by several algorithms: element access (strided runs of T to and
// from contiguous runs of the accumulation type), the filter as the accumulation type and as the
// forward GEMM's matrix, the forward padded input planes, and task balancing. Header-only
// templates: each algorithm's file instantiates what it uses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "dmlops/core/activation.hpp"
#include "dmlops/core/checked.hpp"
#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/lanes.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/rows.hpp"
#include "dmlops/core/scratch.hpp"
#include "dmlops/core/strided.hpp"
#include "dmlops/core/window.hpp"
#include "geometry.hpp"

namespace dmlops::conv {

inline constexpr std::int64_t kMinTaskFlops = 1 << 17;  // below this a task is not worth a thread
inline constexpr std::int64_t kChannelBlock = 16;  // channels-last input channels padded together
inline constexpr std::int64_t kMarginSlack = 4096;  // a padded plane may exceed what is read by this

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

template <class T, class Acc>
void load_run(const std::byte* src, std::int64_t step, std::int64_t n, Acc* dst) {
  if constexpr (std::is_same_v<T, Half>) {
    if (step == sizeof(Half) && aligned(src, alignof(Half)))
      return half_to_float(reinterpret_cast<const Half*>(src), dst, static_cast<std::size_t>(n));
  } else {
    if (step == sizeof(T)) {  // T is Acc: whole input rows, one copy (inline for short rows)
      copy_bytes(reinterpret_cast<std::byte*>(dst), src, static_cast<std::size_t>(n) * sizeof(T));
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
// The bias and activation of one output channel's `count` sums, in place.
template <class Acc>
void add_bias_and_activate(Acc* row, std::int64_t count, Acc bias, const std::optional<FusedActivation>& activation) {
  if (bias != Acc(0)) {
    for (std::int64_t j = 0; j < count; ++j) row[j] += bias;
  }
  if (activation) apply_activation(*activation, row, count);
}

template <class T, class Acc>
void finish_row(Acc* row, std::int64_t count, Acc bias, const std::optional<FusedActivation>& activation,
                std::byte* plane, const Dims& out_spatial, const Dims& out_strides, std::int64_t p0) {
  add_bias_and_activate(row, count, bias, activation);
  for_each_run(out_spatial, out_strides, p0, count, [&](std::int64_t offset, std::int64_t first, std::int64_t n) {
    store_run<T, Acc>(row + first, n, plane + offset, out_strides[out_strides.size() - 1]);
  });
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


// Output channel oc's bias ({1, OutC, 1...}), 0 without one.
template <class T, class Acc>
Acc bias_of(const TensorView* bias, std::int64_t oc) {
  if (!bias) return Acc(0);
  return load_value<T, Acc>(static_cast<const std::byte*>(bias->data) + oc * bias->byte_strides[1]);
}

// Every group's output-channel biases, group grp's at grp * padded (padded >= out_per_group,
// zeros past it), gathered once per call for the tiles that add them as they store their sums
// (empty without a bias).
template <class T, class Acc>
std::vector<Acc> group_biases(const TensorView* bias, const Geometry& g, std::int64_t padded) {
  std::vector<Acc> biases(bias ? static_cast<std::size_t>(g.groups * padded) : 0);
  for (std::int64_t grp = 0; grp < (bias ? g.groups : 0); ++grp) {
    for (std::int64_t i = 0; i < g.out_per_group; ++i)
      biases[static_cast<std::size_t>(grp * padded + i)] = bias_of<T, Acc>(bias, grp * g.out_per_group + i);
  }
  return biases;
}

// A layer's fused activation, split between the GEMM and direct tiles, which apply a relu (after
// the bias) as they store the sums, and a pass over the sums for any other.
struct TileActivation {
  bool relu = false;                     // in the tiles
  std::optional<FusedActivation> after;  // over the stored sums
  explicit TileActivation(const ConvolutionDesc& desc)
      : relu(desc.fused_activation && desc.fused_activation->kind == ActivationKind::Relu),
        after(relu ? std::nullopt : desc.fused_activation) {}
};

// The filter as a view of Acc values: the filter itself, or for float16 a dense float copy
// widened once per call, in bulk (F16C), from any strides. The kernels then read Acc directly
// (converting value by value while packing cost a fifth of a float16 layer).
template <class T>
class AccFilter {
 public:
  using Acc = typename AccumulatorOf<T>::type;
  static constexpr std::int64_t kConvertGrain = 1 << 13;  // values per task

  explicit AccFilter(const TensorView& filter)
      : widened_(std::is_same_v<T, Acc> ? 0 : filter.element_count()), view_(filter) {
    if constexpr (!std::is_same_v<T, Acc>) {
      view_.dtype = DataType::Float32;  // Acc of float16
      view_.byte_strides = packed_strides(filter.sizes);
      for (std::int64_t& stride : view_.byte_strides) stride *= std::int64_t{sizeof(Acc)};
      view_.data = widened_.get();
      // In the filter's element order, in runs as long as its layout allows (the whole filter
      // when it is contiguous), split over the threads: a call per few taps cost more than the
      // conversion (3x3 256>256 float16: 0.3 of 1.8 ms).
      StridedLayout<1> layout(filter.sizes, {filter.byte_strides});
      layout.coalesce(0);
      Dims sizes = Dims::filled(1, 1), strides = Dims::filled(1, std::int64_t{sizeof(T)});  // rank 0: one value
      if (layout.rank() > 0) {
        sizes = layout.sizes();
        strides = Dims::filled(layout.rank(), 0);
        for (int d = 0; d < layout.rank(); ++d) strides[d] = layout.stride(0, d);
      }
      const auto* base = static_cast<const std::byte*>(filter.data);
      parallel_for(0, filter.element_count(), kConvertGrain, [&](std::int64_t begin, std::int64_t end) {
        for_each_run(sizes, strides, begin, end - begin, [&](std::int64_t offset, std::int64_t first, std::int64_t n) {
          load_run<T, Acc>(base + offset, strides[strides.size() - 1], n, widened_.get() + begin + first);
        });
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
  std::vector<std::int64_t> column_offset;  // bytes, within an output channel's filter (unless dense)
  bool dense = false;
  std::int64_t ld = 0;

  FilterMatrix(const Geometry& g, const TensorView& filter, const Taps& tap, bool flip)
      : data(static_cast<const std::byte*>(filter.data)), row_step(filter.byte_strides[0]) {
    const std::int64_t taps = std::ssize(tap.index);
    constexpr std::int64_t kSize = sizeof(Acc);
    // Column k = c * taps + t lies at c * (channel stride) + (tap t's offset): every one at
    // k * kSize exactly when the taps are and the channels follow each other.
    dense = aligned(data, alignof(Acc)) && row_step % kSize == 0 &&
            (g.in_per_group == 1 || filter.byte_strides[1] == taps * kSize);
    for (std::int64_t t = 0; t < taps && dense; ++t) dense = tap.filter(t, flip) == t * kSize;
    ld = row_step / kSize;
    if (dense) return;  // no column table: a dense_row() is the row (3x3 512>512: 4,608 entries a call)
    column_offset.reserve(static_cast<std::size_t>(g.in_per_group * taps));
    for (std::int64_t c = 0; c < g.in_per_group; ++c) {
      for (std::int64_t t = 0; t < taps; ++t) column_offset.push_back(c * filter.byte_strides[1] + tap.filter(t, flip));
    }
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
inline BlockWalker forward_walker(const Geometry& g) {
  std::vector<WindowAxis> axes(static_cast<std::size_t>(g.D));
  for (int a = 0; a < g.D; ++a)
    axes[a] = WindowAxis{g.in_spatial[a], g.kernel[a], g.strides[a], g.dilations[a], g.start[a], g.end[a]};
  return BlockWalker(std::move(axes));
}

#if DMLOPS_X86
// even[i] = src[2i], odd[i] = src[2i + 1] for i < pairs: float rows of a stride-2 layer, eight
// pairs per step (two loads, two shuffles, two lane permutes).
void split_pairs_avx2(const float* src, std::int64_t pairs, float* even, float* odd);
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
  // Rows [r0, r1) only (default: all), row r at dst + (r - r0) * row_len.
  template <class T, class Acc>
  void fill(const Geometry& g, const std::byte* src, std::int64_t channel_step, std::int64_t channels,
            const Dims& in_strides, Acc* dst, Acc* lines, std::int64_t r0 = 0, std::int64_t r1 = -1) const {
    const std::int64_t width = row_stop - row_first, step = in_strides[last];
    if (g.D == 2 && channels == 1 && phases == 1 && width > 0)
      return fill_plane<T, Acc>(g, src, in_strides[0], step, width, dst, r0, r1 < 0 ? rows : r1);
    for_each_row(g, in_strides, r0, r1 < 0 ? rows : r1, [&](std::int64_t r, bool inside, std::int64_t offset) {
      Acc* dst_row = dst + (r - r0) * row_len;
      if (!inside) {
        for (std::int64_t c = 0; c < channels; ++c) std::fill_n(dst_row + c * size, row_len, Acc(0));
        return;
      }
      if (channels == 1 && phases == 1) {  // the padding's few zeros as stores, not memset calls
        fill_row<Acc>(reinterpret_cast<std::byte*>(dst_row), sizeof(Acc), Acc(0), row_first);
        load_run<T, Acc>(src + offset, step, width, dst_row + row_first);
        fill_row<Acc>(reinterpret_cast<std::byte*>(dst_row + row_stop), sizeof(Acc), Acc(0), row_len - row_stop);
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
  // fill's rows [r0, r1) of one 2-D plane: the zeros between two input rows (one row's end and
  // the next one's start) as one run, and the input rows, when they are contiguous values of
  // Acc, in one copy_byte_rows call. A row at a time, as a fill, a load and a fill call, the 9x9
  // planes of 3x3 64@7 in batches of 64 took 18% of the layer's time (512@7, 64@56: 2-3%); per
  // row that is a few nanoseconds for 7 values.
  template <class T, class Acc>
  void fill_plane(const Geometry& g, const std::byte* src, std::int64_t row_step, std::int64_t step,
                  std::int64_t width, Acc* dst, std::int64_t r0, std::int64_t r1) const {
    constexpr std::int64_t E = sizeof(Acc);
    auto* bytes = reinterpret_cast<std::byte*>(dst);
    const std::int64_t first = std::clamp(g.start[0], r0, r1);
    const std::int64_t stop = std::clamp(g.start[0] + g.in_spatial[0], first, r1);
    if (first == stop) return fill_row<Acc>(bytes, E, Acc(0), (r1 - r0) * row_len);
    const std::int64_t head = (first - r0) * row_len + row_first;
    const std::byte* row = src + (first - g.start[0]) * row_step;
    fill_row<Acc>(bytes, E, Acc(0), head);  // the rows above and the first input row's start
    if (std::is_same_v<T, Acc> && step == E) {
      copy_byte_rows(bytes + head * E, row_len * E, row, row_step, static_cast<std::size_t>(width * E), stop - first);
    } else {
      for (std::int64_t r = first; r < stop; ++r, row += row_step)
        load_run<T, Acc>(row, step, width, dst + head + (r - first) * row_len);
    }
    fill_rows<Acc>(bytes + (head + width) * E, row_len * E, Acc(0), row_len - width, stop - first - 1);
    const std::int64_t tail = (stop - 1 - r0) * row_len + row_stop;  // the last input row's end and the rows below
    fill_row<Acc>(bytes + tail * E, E, Acc(0), (r1 - r0) * row_len - tail);
  }

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
  // Values per chunk of the padding, at least: with 16K, the small planes of deep layers gave 16
  // threads 2 chunks (3x3 512@7) or 4 (256@14); with 2K these ran 4% faster on the 16-core Xeon.
  static constexpr std::int64_t kPadGrain = 1 << 11;

  PaddedInput(const Geometry& g, const PaddedPlane& pad, const TensorView& in, bool interleave = false)
      : in_(in), in_channels_(g.in_channels), size_(pad.size), direct_(reads_in_place(g, pad, in)),
        interleaved_(!direct_ && interleave && channels_last(g, in)),
        planes_(direct_ ? 0 : checked_mul(g.batch * g.in_channels, pad.size, kOp, ": the padded input's element count")) {
    if (direct_) return;
    const Dims in_strides = spatial(in.byte_strides);
    const auto* in_base = static_cast<const std::byte*>(in.data);
    if (interleaved_) {
      const std::int64_t grain = std::max<std::int64_t>(1, kPadGrain / (pad.row_len * g.in_channels));
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
    parallel_for(0, g.batch * per_batch, std::max<std::int64_t>(1, kPadGrain / (pad.size * channels)), [&](std::int64_t begin, std::int64_t end) {
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

  static bool channels_last(const Geometry& g, const TensorView& in) {
    return std::abs(in.byte_strides[1]) < std::abs(in.byte_strides[1 + g.D]);
  }
  // The input planes are their own padded planes: no copy is needed.
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

 private:
  const TensorView& in_;
  std::int64_t in_channels_, size_;
  bool direct_, interleaved_;
  Scratch<Acc> planes_;
};

// A count of position blocks near `blocks` for which `per_block * count` equal tasks spread
// evenly over parallel_for's chunks: a multiple of the threads within one round of chunks (one
// task per chunk), else a multiple of the chunk count. A thread that runs one task more than the
// others sets the time (5 tasks on 2 threads take 3 units, not 2.5). `blocks` itself when no
// count within a factor of two qualifies. Without `fewer`, only counts from `blocks` up (when
// `blocks` is a bound: blocks that must fit a cache).
std::int64_t balanced_count(std::int64_t per_block, std::int64_t blocks, std::int64_t threads, bool fewer = true);

}  // namespace dmlops::conv
