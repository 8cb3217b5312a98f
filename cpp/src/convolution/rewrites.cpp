#include "rewrites.hpp"

#include <cstring>

#include "common.hpp"
#include "dmlops/core/checked.hpp"

namespace dmlops::conv {
namespace {

// A one-tap window that never reaches the padding (no start padding, the last output inside
// the input) only samples the input: the convolution is then a 1x1 stride-1 one of the strided
// view x[..., ::stride] (its byte strides times the window strides). Rewritten that way, the
// padded planes hold only the sampled positions, densely (a stride-2 layer copies a quarter
// of its input instead of splitting every row into phases), and the product runs on them as on
// any pointwise layer. Empty when there is nothing to rewrite (unit strides) or it does not apply.
std::optional<Geometry> sampled_geometry(const Geometry& g) {
  bool applies = false;
  for (int a = 0; a < g.D; ++a) {
    if (g.kernel[a] != 1 || g.start[a] != 0 || (g.out_spatial[a] - 1) * g.strides[a] >= g.in_spatial[a]) return {};
    applies = applies || g.strides[a] > 1;
  }
  if (!applies) return {};
  Geometry sampled = g;
  sampled.in_spatial = g.out_spatial;
  sampled.strides = sampled.dilations = Dims::filled(g.D, 1);
  sampled.end = Dims::filled(g.D, 0);
  return sampled;
}

// The view sampled_geometry(g) reads.
TensorView sampled_view(const Geometry& g, TensorView view) {
  for (int a = 0; a < g.D; ++a) {
    view.sizes[2 + a] = g.out_spatial[a];
    view.byte_strides[2 + a] *= g.strides[a];
  }
  return view;
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

}  // namespace

std::string Rewrite::name() const {
  if (compacted && sampled) return "compact, sampled";
  return compacted ? "compact" : sampled ? "sampled" : "";
}

Rewrite rewrite(const Geometry& g) {
  Rewrite r{g, std::nullopt, false};
  if (g.direction != ConvolutionDirection::Forward) return r;
  // compact_geometry reaches its fixed point at once: a compacted axis reads all its positions.
  if (auto c = compact_geometry(g)) r.geometry = *(r.compacted = std::move(c));
  if (r.geometry.in_per_group != 1) {
    if (auto s = sampled_geometry(r.geometry)) {
      r.geometry = *s;
      r.sampled = true;
    }
  }
  return r;
}

TensorView rewritten_input(const Geometry& g, const Rewrite& r, const TensorView& in, std::vector<std::byte>& buffer) {
  if (!r.compacted) return r.sampled ? sampled_view(g, in) : in;
  const TensorView compact = compact_input(g, *r.compacted, in, buffer);
  return r.sampled ? sampled_view(*r.compacted, compact) : compact;
}

}  // namespace dmlops::conv
