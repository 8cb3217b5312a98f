#include "dmlops/core/filter.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <type_traits>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/gather.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/strided.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops {

void AxisFilter::push(std::int64_t first_index, const std::vector<double>& tap_weights) {
  if (begin.empty()) begin.push_back(0);
  first.push_back(first_index);
  weights.insert(weights.end(), tap_weights.begin(), tap_weights.end());
  begin.push_back(static_cast<std::int64_t>(weights.size()));
}

namespace {

constexpr std::int64_t kTileElements = 32 * 1024;  // output elements per task: its passes stay in L2
constexpr std::int64_t kSplitElements = 64 * 1024;  // smaller outputs are not cut up for more threads
constexpr std::int64_t kChunk = 512;                // elements per inner loop (scratch stays in L1)

template <class T>
using AccOf = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class Src, class Acc>
Acc to_acc(const std::byte* p) {
  Src v;
  std::memcpy(&v, p, sizeof(Src));
  if constexpr (std::is_same_v<Src, Half>) {
    return half_bits_to_float(v.bits);
  } else {
    return static_cast<Acc>(v);
  }
}

template <class Dst, class Acc>
void from_acc(std::byte* p, Acc v) {
  if constexpr (std::is_same_v<Dst, Half>) {
    const std::uint16_t bits = float_to_half_bits(v);
    std::memcpy(p, &bits, sizeof(bits));
  } else {
    const Dst d = static_cast<Dst>(v);
    std::memcpy(p, &d, sizeof(Dst));
  }
}

// n elements of type Src, `step` bytes apart, as Acc: the memory itself when it already is
// contiguous aligned Acc, else converted into buf.
template <class Src, class Acc>
const Acc* load_acc(const std::byte* src, std::int64_t step, std::int64_t n, Acc* buf) {
  if (step == sizeof(Src) && aligned(src, alignof(Src))) {
    if constexpr (std::is_same_v<Src, Acc>) {
      return reinterpret_cast<const Acc*>(src);
    } else if constexpr (std::is_same_v<Src, Half>) {
      half_to_float(reinterpret_cast<const Half*>(src), buf, static_cast<std::size_t>(n));
      return buf;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) buf[i] = to_acc<Src, Acc>(src + i * step);
  return buf;
}

// Where n results bound for dst go first: dst itself when it is contiguous aligned Acc, else buf.
template <class Dst, class Acc>
Acc* acc_target(std::byte* dst, std::int64_t step, Acc* buf) {
  if constexpr (std::is_same_v<Dst, Acc>) {
    if (step == sizeof(Acc) && aligned(dst, alignof(Acc))) return reinterpret_cast<Acc*>(dst);
  }
  return buf;
}

template <class Dst, class Acc>
void store_acc(std::byte* dst, std::int64_t step, const Acc* values, std::int64_t n) {
  if (values == reinterpret_cast<const Acc*>(dst)) return;  // computed in place
  if (step == sizeof(Dst) && aligned(dst, alignof(Dst))) {
    if constexpr (std::is_same_v<Dst, Acc>) {
      std::memcpy(dst, values, static_cast<std::size_t>(n) * sizeof(Acc));
      return;
    } else if constexpr (std::is_same_v<Dst, Half>) {
      float_to_half(values, reinterpret_cast<Half*>(dst), static_cast<std::size_t>(n));
      return;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) from_acc<Dst, Acc>(dst + i * step, values[i]);
}

// ---------------------------------------------------------------------------------------------
// Row kernels. Each is written once as an always-inline body and compiled twice: for the
// baseline ISA and, in a target("avx2") wrapper, for AVX2 (wider vectors; no FMA, so both give
// the same bits). RowKernels<Acc>::get() picks one set per process (dmlops::avx2_enabled).

// acc[i] = w0 * x0[i] + w1 * x1[i]: a blend of two rows (linear).
template <class Acc>
DMLOPS_ALWAYS_INLINE inline void blend2_body(Acc* DMLOPS_RESTRICT acc, const Acc* DMLOPS_RESTRICT x0, const Acc* DMLOPS_RESTRICT x1,
                                               Acc w0, Acc w1, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) acc[i] = w0 * x0[i] + w1 * x1[i];
}

// acc[i] = w * x[i] (first tap) or acc[i] += w * x[i] (later taps).
template <class Acc, bool kAccumulate>
DMLOPS_ALWAYS_INLINE inline void axpy_body(Acc* DMLOPS_RESTRICT acc, const Acc* DMLOPS_RESTRICT x, Acc w, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) acc[i] = kAccumulate ? acc[i] + w * x[i] : w * x[i];
}

// The horizontal linear kernel: acc[i] = w0[i] * row[f] + w1[i] * row[f + 1], f = first[i] - shift,
// the second product only where w1[i] != 0 (a tap of weight 0 is never read: inf * 0 is nan).
// row[] has one readable element past the last index.
template <class Acc>
DMLOPS_ALWAYS_INLINE inline void pairs_body(Acc* DMLOPS_RESTRICT acc, const Acc* DMLOPS_RESTRICT row,
                                              const std::int32_t* DMLOPS_RESTRICT first, const Acc* DMLOPS_RESTRICT w0,
                                              const Acc* DMLOPS_RESTRICT w1, std::int64_t shift, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t f = first[i] - shift;
    const Acc a = w0[i] * row[f];
    const Acc b = a + w1[i] * row[f + 1];
    acc[i] = w1[i] != 0 ? b : a;
  }
}

template <class Acc>
struct RowKernels {
  void (*blend2)(Acc*, const Acc*, const Acc*, Acc, Acc, std::int64_t);
  void (*scale)(Acc*, const Acc*, Acc, std::int64_t);
  void (*accumulate)(Acc*, const Acc*, Acc, std::int64_t);
  void (*pairs)(Acc*, const Acc*, const std::int32_t*, const Acc*, const Acc*, std::int64_t, std::int64_t);
  static const RowKernels& get();
};

template <class Acc>
void blend2_baseline(Acc* acc, const Acc* x0, const Acc* x1, Acc w0, Acc w1, std::int64_t n) {
  blend2_body(acc, x0, x1, w0, w1, n);
}
template <class Acc>
void scale_baseline(Acc* acc, const Acc* x, Acc w, std::int64_t n) { axpy_body<Acc, false>(acc, x, w, n); }
template <class Acc>
void accumulate_baseline(Acc* acc, const Acc* x, Acc w, std::int64_t n) { axpy_body<Acc, true>(acc, x, w, n); }
template <class Acc>
void pairs_baseline(Acc* acc, const Acc* row, const std::int32_t* first, const Acc* w0, const Acc* w1,
                    std::int64_t shift, std::int64_t n) {
  pairs_body(acc, row, first, w0, w1, shift, n);
}

template <class Acc>
DMLOPS_TARGET("avx2") void blend2_avx2(Acc* acc, const Acc* x0, const Acc* x1, Acc w0, Acc w1, std::int64_t n) {
  blend2_body(acc, x0, x1, w0, w1, n);
}
template <class Acc>
DMLOPS_TARGET("avx2") void scale_avx2(Acc* acc, const Acc* x, Acc w, std::int64_t n) {
  axpy_body<Acc, false>(acc, x, w, n);
}
template <class Acc>
DMLOPS_TARGET("avx2") void accumulate_avx2(Acc* acc, const Acc* x, Acc w, std::int64_t n) {
  axpy_body<Acc, true>(acc, x, w, n);
}

#if DMLOPS_X86
// float pairs with AVX2: where 8 consecutive outputs read from 9 consecutive row elements
// (always, when upsampling), load those once and permute them into place instead of gathering
// element by element. Other groups take the scalar body.
DMLOPS_TARGET("avx2") void pairs_avx2(float* acc, const float* row, const std::int32_t* first,
                                                const float* w0, const float* w1, std::int64_t shift,
                                                std::int64_t n) {
  std::int64_t i = 0;
  const __m256i seven = _mm256_set1_epi32(7);
  for (; i + 8 <= n; i += 8) {
    const __m256i f = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + i));
    const __m256i lane = _mm256_sub_epi32(f, _mm256_set1_epi32(first[i]));
    // every lane in [0, 7]: unsigned lane > 7 catches negative lanes too
    if (!_mm256_testz_si256(_mm256_cmpgt_epi32(lane, seven), _mm256_set1_epi32(-1)) ||
        !_mm256_testz_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), lane), _mm256_set1_epi32(-1))) {
      pairs_body(acc + i, row, first + i, w0 + i, w1 + i, shift, 8);
      continue;
    }
    const float* base = row + (first[i] - shift);
    const __m256 x0 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(base), lane);
    const __m256 x1 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(base + 1), lane);
    const __m256 v1 = _mm256_loadu_ps(w1 + i);
    const __m256 a = _mm256_mul_ps(_mm256_loadu_ps(w0 + i), x0);
    const __m256 b = _mm256_add_ps(a, _mm256_mul_ps(v1, x1));
    _mm256_storeu_ps(acc + i, _mm256_blendv_ps(a, b, _mm256_cmp_ps(v1, _mm256_setzero_ps(), _CMP_NEQ_OQ)));
  }
  pairs_body(acc + i, row, first + i, w0 + i, w1 + i, shift, n - i);
}
#endif

template <class Acc>
DMLOPS_TARGET("avx2") void pairs_avx2_scalar(Acc* acc, const Acc* row, const std::int32_t* first,
                                                       const Acc* w0, const Acc* w1, std::int64_t shift,
                                                       std::int64_t n) {
  pairs_body(acc, row, first, w0, w1, shift, n);
}

template <class Acc>
const RowKernels<Acc>& RowKernels<Acc>::get() {
  static const RowKernels kernels = [] {
    if (avx2_enabled()) {
      RowKernels k{blend2_avx2<Acc>, scale_avx2<Acc>, accumulate_avx2<Acc>, pairs_avx2_scalar<Acc>};
#if DMLOPS_X86
      if constexpr (std::is_same_v<Acc, float>) k.pairs = pairs_avx2;
#endif
      return k;
    }
    return RowKernels{blend2_baseline<Acc>, scale_baseline<Acc>, accumulate_baseline<Acc>, pairs_baseline<Acc>};
  }();
  return kernels;
}

// ---------------------------------------------------------------------------------------------
// Passes

// A linear axis (every output one or two taps) in the flat form of the pairs kernel: output o
// reads first[o] with weight w0[o] and first[o] + 1 with weight w1[o] (0 for a single tap).
template <class Acc>
struct PairTable {
  std::vector<std::int32_t> first;
  std::vector<Acc> w0, w1;
};

// One pass's view of an axis filter, for the outputs of one tile: output o (counted from the
// tile's first) reads operand indices index(o), index(o) + 1, ... along the axis.
template <class Acc>
struct TileTaps {
  const std::int64_t* first;  // at the tile's first output
  const std::int64_t* begin;  // at the tile's first output
  const Acc* weights;         // the whole axis
  std::int64_t shift;         // input index of the operand's element 0 along the axis
  // The pair table at the tile's first output, or null first when the axis has none.
  const std::int32_t* pair_first;
  const Acc* pair_w0;
  const Acc* pair_w1;

  std::int64_t index(std::int64_t o) const { return first[o] - shift; }
  std::int64_t count(std::int64_t o) const { return begin[o + 1] - begin[o]; }
  const Acc* w(std::int64_t o) const { return weights + begin[o]; }
};

// Elements a horizontal source row may be read past its end (the pairs kernels' loads).
constexpr std::int64_t kRowPadding = 8;

template <class Acc>
struct Scratch {
  std::vector<Acc> tiles[2];  // intermediate results, ping-pong
  std::vector<Acc> row;       // the source row of a horizontal pass, kRowPadding more
  std::vector<Acc> x0 = std::vector<Acc>(kChunk), x1 = std::vector<Acc>(kChunk), acc = std::vector<Acc>(kChunk);
};

// dst[i] = sum_t w[t] * src[t * tap_step + i * src_step] over n elements: a blend of whole rows.
template <class Src, class Dst, class Acc>
void vertical_row(std::byte* dst, std::int64_t dst_step, const std::byte* src, std::int64_t tap_step,
                  std::int64_t src_step, std::int64_t taps, const Acc* w, std::int64_t n, Scratch<Acc>& s) {
  const RowKernels<Acc>& k = RowKernels<Acc>::get();
  for (std::int64_t c = 0; c < n; c += kChunk) {
    const std::int64_t m = std::min(kChunk, n - c);
    std::byte* d = dst + c * dst_step;
    const std::byte* x = src + c * src_step;
    Acc* acc = acc_target<Dst, Acc>(d, dst_step, s.acc.data());
    const Acc* x0 = load_acc<Src, Acc>(x, src_step, m, s.x0.data());
    if (taps == 2) {
      k.blend2(acc, x0, load_acc<Src, Acc>(x + tap_step, src_step, m, s.x1.data()), w[0], w[1], m);
    } else {
      k.scale(acc, x0, w[0], m);
      for (std::int64_t t = 1; t < taps; ++t)
        k.accumulate(acc, load_acc<Src, Acc>(x + t * tap_step, src_step, m, s.x1.data()), w[t], m);
    }
    store_acc<Dst, Acc>(d, dst_step, acc, m);
  }
}

// dst[o] = sum_t w(o)[t] * src[index(o) + t] along one row.
template <class Src, class Dst, class Acc>
void horizontal_row(std::byte* dst, std::int64_t dst_step, std::int64_t n, const std::byte* src, std::int64_t src_step,
                    std::int64_t src_size, const TileTaps<Acc>& taps, Scratch<Acc>& s) {
  // Always a copy: the pairs kernels read past the last element.
  Acc* row = s.row.data();
  if (load_acc<Src, Acc>(src, src_step, src_size, row) != row)
    std::memcpy(row, src, static_cast<std::size_t>(src_size) * sizeof(Acc));
  const RowKernels<Acc>& k = RowKernels<Acc>::get();
  for (std::int64_t c = 0; c < n; c += kChunk) {
    const std::int64_t m = std::min(kChunk, n - c);
    std::byte* d = dst + c * dst_step;
    Acc* acc = acc_target<Dst, Acc>(d, dst_step, s.acc.data());
    if (taps.pair_first) {
      k.pairs(acc, row, taps.pair_first + c, taps.pair_w0 + c, taps.pair_w1 + c, taps.shift, m);
    } else {
      for (std::int64_t i = 0; i < m; ++i) {
        const std::int64_t f = taps.index(c + i), count = taps.count(c + i);
        const Acc* w = taps.w(c + i);
        Acc v = w[0] * row[f];
        for (std::int64_t t = 1; t < count; ++t) v += w[t] * row[f + t];
        acc[i] = v;
      }
    }
    store_acc<Dst, Acc>(d, dst_step, acc, m);
  }
}

// A strided operand of a pass over the slab axes: element [0, ..., 0], sizes, byte strides.
struct Operand {
  std::byte* data;
  Dims sizes;
  Dims strides;
};

// Filters `src` along `axis` into `dst` (same sizes but along the axis).
template <class Src, class Dst, class Acc>
void run_pass(const Operand& src, const Operand& dst, int axis, const TileTaps<Acc>& taps, Scratch<Acc>& s) {
  Dims src_strides = src.strides;
  src_strides[axis] = 0;  // the taps step along the axis themselves
  StridedLayout<2> layout(dst.sizes, {dst.strides, src_strides});
  layout.sort_by_stride(0);  // write in memory order
  layout.coalesce(1u << axis);
  const int inner = layout.rank() - 1;
  int axis_dim = 0;
  while (layout.source_axis(axis_dim) != axis) ++axis_dim;
  const bool horizontal = axis_dim == inner;
  const std::int64_t n = layout.size(inner), dst_step = layout.stride(0, inner), src_step = layout.stride(1, inner);
  const std::int64_t tap_step = src.strides[axis];

  Dims row_sizes;
  for (int d = 0; d < inner; ++d) row_sizes.push_back(layout.size(d));
  const std::int64_t rows = row_sizes.product();
  NdCounter counter(row_sizes, 0);
  for (std::int64_t r = 0; r < rows; ++r, counter.next()) {
    std::int64_t dst_offset = 0, src_offset = 0, o = 0;
    for (int d = 0; d < inner; ++d) {
      dst_offset += counter[d] * layout.stride(0, d);
      src_offset += counter[d] * layout.stride(1, d);
      if (d == axis_dim) o = counter[d];
    }
    if (horizontal) {
      horizontal_row<Src, Dst, Acc>(dst.data + dst_offset, dst_step, n, src.data + src_offset, tap_step,
                                    src.sizes[axis], taps, s);
    } else {
      vertical_row<Src, Dst, Acc>(dst.data + dst_offset, dst_step, src.data + src_offset + taps.index(o) * tap_step,
                                  tap_step, src_step, taps.count(o), taps.w(o), n, s);
    }
  }
}

// Everything the tasks need, computed once per call. Axes before the first filtered one (f0)
// are identities iterated outside the tiles; a tile spans blocks of the filtered axes and the
// whole extent of the identity axes after f0.
template <class Acc>
struct Plan {
  int rank = 0, f0 = 0;
  std::vector<int> order;         // filtered axes in pass order
  std::vector<int> filtered;      // filtered axes, ascending
  Dims block, blocks;             // per axis: outputs per tile, tiles along it (1 for identity axes)
  Dims max_range;                 // per filtered axis: the most input indices one block reads
  Dims outer_sizes;               // axes [0, f0)
  std::vector<std::vector<Acc>> weights;  // per axis, in Acc
  std::vector<PairTable<Acc>> pairs;      // per axis: the pair table, empty unless linear
  std::int64_t tasks = 0, tile_elements = 0, tile_scratch = 0, row_scratch = 0;
};

// The input indices [lo, hi) that outputs [ob, oe) of an axis read.
std::pair<std::int64_t, std::int64_t> input_range(const AxisFilter& f, std::int64_t ob, std::int64_t oe) {
  std::int64_t lo = f.first[ob], hi = 0;
  for (std::int64_t o = ob; o < oe; ++o) {
    lo = std::min(lo, f.first[o]);
    hi = std::max(hi, f.first[o] + f.taps(o));
  }
  return {lo, hi};
}

// The order of the passes: the cheapest under a simple cost model, in which a pass costs its
// output elements times its average taps, times kHorizontalCost when it filters the last axis
// (a horizontal pass gathers; the others blend whole rows). So axes that shrink go first and the
// horizontal pass runs on the smaller array. Every order is tried for up to kSearchAxes axes;
// beyond, axes go in order of growing out/in ratio.
std::vector<int> pass_order(const Dims& in, const Dims& out, const std::vector<AxisFilter>& axes,
                            std::vector<int> filtered) {
  constexpr double kHorizontalCost = 3.0;
  constexpr std::size_t kSearchAxes = 5;
  const int last = in.size() - 1;
  const auto cost = [&](const std::vector<int>& order) {
    std::vector<double> sizes(in.begin(), in.end());
    double total = 0.0;
    for (int a : order) {
      sizes[static_cast<std::size_t>(a)] = static_cast<double>(out[a]);
      double elements = 1.0;
      for (double n : sizes) elements *= n;
      const double taps = static_cast<double>(axes[a].weights.size()) / static_cast<double>(out[a]);
      total += elements * taps * (a == last ? kHorizontalCost : 1.0);
    }
    return total;
  };
  if (filtered.size() > kSearchAxes) {
    std::stable_sort(filtered.begin(), filtered.end(), [&](int a, int b) {
      return static_cast<double>(out[a]) / static_cast<double>(in[a]) <
             static_cast<double>(out[b]) / static_cast<double>(in[b]);
    });
    return filtered;
  }
  std::vector<int> best = filtered;  // ascending: the first permutation
  double best_cost = cost(best);
  while (std::next_permutation(filtered.begin(), filtered.end())) {
    const double c = cost(filtered);
    if (c < best_cost) {
      best_cost = c;
      best = filtered;
    }
  }
  return best;
}

// The filtered axes in the order a caller gave (see separable_filter).
std::vector<int> given_order(const std::vector<int>& order, const std::vector<AxisFilter>& axes,
                             const std::vector<int>& filtered) {
  std::vector<int> passes;
  for (int a : order) {
    if (a < 0 || a >= static_cast<int>(axes.size()))
      fail("separable_filter: pass order names axis ", a, " of a rank-", axes.size(), " array");
    if (axes[static_cast<std::size_t>(a)].identity()) continue;
    if (std::find(passes.begin(), passes.end(), a) != passes.end())
      fail("separable_filter: pass order names axis ", a, " twice");
    passes.push_back(a);
  }
  if (passes.size() != filtered.size())
    fail("separable_filter: pass order names ", passes.size(), " of the ", filtered.size(), " filtered axes");
  return passes;
}

template <class Acc>
Plan<Acc> make_plan(const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes,
                    const std::vector<int>& order) {
  Plan<Acc> plan;
  plan.rank = out.sizes.size();
  for (int a = 0; a < plan.rank; ++a) {
    if (!axes[a].identity()) plan.filtered.push_back(a);
  }
  plan.f0 = plan.filtered.front();
  plan.order = order.empty() ? pass_order(in.sizes, out.sizes, axes, plan.filtered) : given_order(order, axes, plan.filtered);
  plan.weights.resize(static_cast<std::size_t>(plan.rank));
  plan.pairs.resize(static_cast<std::size_t>(plan.rank));
  for (int a : plan.filtered) {
    const AxisFilter& f = axes[a];
    plan.weights[a].assign(f.weights.begin(), f.weights.end());
    bool linear = in.sizes[a] < std::numeric_limits<std::int32_t>::max();
    for (std::int64_t o = 0; linear && o < f.size(); ++o) linear = f.taps(o) <= 2;
    PairTable<Acc>& pair = plan.pairs[a];
    for (std::int64_t o = 0; linear && o < f.size(); ++o) {
      pair.first.push_back(static_cast<std::int32_t>(f.first[o]));
      pair.w0.push_back(plan.weights[a][f.begin[o]]);
      pair.w1.push_back(f.taps(o) == 2 ? plan.weights[a][f.begin[o] + 1] : Acc{0});
    }
  }
  for (int a = 0; a < plan.f0; ++a) plan.outer_sizes.push_back(out.sizes[a]);

  // Tiles: whole inner extents first, then blocks of the outer filtered axes, ~kTileElements each.
  plan.block = Dims::filled(plan.rank, 1);
  plan.blocks = Dims::filled(plan.rank, 1);
  std::int64_t tile = 1;
  for (int a = plan.rank - 1; a >= plan.f0; --a) {
    plan.block[a] = axes[a].identity() ? out.sizes[a] : std::clamp<std::int64_t>(kTileElements / tile, 1, out.sizes[a]);
    tile *= plan.block[a];
  }
  const auto count_tasks = [&] {
    std::int64_t tasks = plan.outer_sizes.product();
    for (int a : plan.filtered) {
      plan.blocks[a] = (out.sizes[a] + plan.block[a] - 1) / plan.block[a];
      tasks *= plan.blocks[a];
    }
    return tasks;
  };
  plan.tasks = count_tasks();
  // Enough tiles for every thread, when the output is worth splitting.
  if (out.element_count() >= kSplitElements) {
    for (int a : plan.filtered) {
      while (plan.tasks < 4 * num_threads() && plan.block[a] > 1) {
        plan.block[a] = (plan.block[a] + 1) / 2;
        plan.tasks = count_tasks();
      }
    }
  }
  plan.tile_elements = 1;
  for (int a = plan.f0; a < plan.rank; ++a) plan.tile_elements *= plan.block[a];

  // Scratch sizes: the largest intermediate tile and the longest horizontal source row.
  plan.max_range = Dims::filled(plan.rank, 0);
  for (int a : plan.filtered) {
    for (std::int64_t ob = 0; ob < out.sizes[a]; ob += plan.block[a]) {
      const auto [lo, hi] = input_range(axes[a], ob, std::min(out.sizes[a], ob + plan.block[a]));
      plan.max_range[a] = std::max(plan.max_range[a], hi - lo);
    }
    plan.row_scratch = std::max(plan.row_scratch, plan.max_range[a]);
  }
  Dims stage;  // tile sizes over the slab axes as the passes go
  for (int a = plan.f0; a < plan.rank; ++a) stage.push_back(axes[a].identity() ? in.sizes[a] : plan.max_range[a]);
  for (std::size_t p = 0; p + 1 < plan.order.size(); ++p) {
    stage[plan.order[p] - plan.f0] = plan.block[plan.order[p]];
    plan.tile_scratch = std::max(plan.tile_scratch, stage.product());
  }
  return plan;
}

// Tiles per parallel_for chunk: a chunk is worth waking a thread for, but never so many that
// some threads get none of the tiles make_plan cut for them: a tile's passes read far more than
// it writes when the filter shrinks an axis (16 planes of 512x512 resampled to a quarter,
// antialiased: 64 tiles of 4,096 outputs at 16 threads went 8 to a chunk, and the 16-core Xeon
// ran it no faster on 16 threads than on 4).
template <class Acc>
std::int64_t filter_grain(const Plan<Acc>& plan) {
  return std::max<std::int64_t>(1, std::min(kSplitElements / 2 / plan.tile_elements, plan.tasks / num_threads()));
}

// One task: the tile `task` (its block along each filtered axis, innermost fastest, then the
// outer index), pass by pass.
template <class T, class Acc>
void run_tile(const Plan<Acc>& plan, const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes,
              std::int64_t task, Scratch<Acc>& s) {
  std::int64_t rest = task;
  Dims ob = Dims::filled(plan.rank, 0), oe = Dims::filled(plan.rank, 0);
  for (auto it = plan.filtered.rbegin(); it != plan.filtered.rend(); ++it) {
    const int a = *it;
    ob[a] = rest % plan.blocks[a] * plan.block[a];
    oe[a] = std::min(out.sizes[a], ob[a] + plan.block[a]);
    rest /= plan.blocks[a];
  }
  const NdCounter outer(plan.outer_sizes, rest);
  Operand src{static_cast<std::byte*>(in.data), {}, {}};
  Operand dst{static_cast<std::byte*>(out.data), {}, {}};
  for (int a = 0; a < plan.f0; ++a) {
    src.data += outer[a] * in.byte_strides[a];
    dst.data += outer[a] * out.byte_strides[a];
  }
  std::array<TileTaps<Acc>, kMaxRank> taps{};
  for (int a = plan.f0; a < plan.rank; ++a) {
    src.strides.push_back(in.byte_strides[a]);
    dst.strides.push_back(out.byte_strides[a]);
    if (axes[a].identity()) {
      src.sizes.push_back(in.sizes[a]);
      dst.sizes.push_back(out.sizes[a]);
      continue;
    }
    const auto [lo, hi] = input_range(axes[a], ob[a], oe[a]);
    src.data += lo * in.byte_strides[a];
    src.sizes.push_back(hi - lo);
    dst.data += ob[a] * out.byte_strides[a];
    dst.sizes.push_back(oe[a] - ob[a]);
    const PairTable<Acc>& pair = plan.pairs[a];
    const bool has_pairs = !pair.first.empty();
    taps[a] = TileTaps<Acc>{axes[a].first.data() + ob[a], axes[a].begin.data() + ob[a], plan.weights[a].data(), lo,
                            has_pairs ? pair.first.data() + ob[a] : nullptr,
                            has_pairs ? pair.w0.data() + ob[a] : nullptr, has_pairs ? pair.w1.data() + ob[a] : nullptr};
  }
  // Each pass turns one axis of the current operand from input range to output block;
  // intermediate operands are packed Acc tiles, the last pass writes the output.
  Operand current = src;
  for (std::size_t p = 0; p < plan.order.size(); ++p) {
    const int a = plan.order[p], axis = a - plan.f0;
    const bool first = p == 0, last = p + 1 == plan.order.size();
    Operand next = dst;
    if (!last) {
      Dims sizes = current.sizes;
      sizes[axis] = oe[a] - ob[a];
      Dims strides = packed_strides(sizes);
      for (std::int64_t& stride : strides) stride *= static_cast<std::int64_t>(sizeof(Acc));
      next = Operand{reinterpret_cast<std::byte*>(s.tiles[p % 2].data()), sizes, strides};
    }
    if (first && last) run_pass<T, T, Acc>(current, next, axis, taps[a], s);
    else if (first) run_pass<T, Acc, Acc>(current, next, axis, taps[a], s);
    else if (last) run_pass<Acc, T, Acc>(current, next, axis, taps[a], s);
    else run_pass<Acc, Acc, Acc>(current, next, axis, taps[a], s);
    current = next;
  }
}

template <class T>
void run_filter(const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes,
                const std::vector<int>& order) {
  using Acc = AccOf<T>;
  const Plan<Acc> plan = make_plan<Acc>(in, out, axes, order);
  parallel_for(0, plan.tasks, filter_grain(plan), [&](std::int64_t begin, std::int64_t end) {
    Scratch<Acc> s;
    for (auto& t : s.tiles) t.resize(static_cast<std::size_t>(plan.tile_scratch));
    s.row.resize(static_cast<std::size_t>(plan.row_scratch + kRowPadding));
    for (std::int64_t task = begin; task < end; ++task) run_tile<T, Acc>(plan, in, out, axes, task, s);
  });
}

}  // namespace

namespace {

// Checks the arguments; whether any axis is filtered (else the call is a copy).
bool check_filters(const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes) {
  const int rank = out.sizes.size();
  if (in.sizes.size() != rank || static_cast<int>(axes.size()) != rank)
    fail("separable_filter: input rank ", in.sizes.size(), ", output rank ", rank, ", ", axes.size(), " axis filters");
  if (in.dtype != out.dtype || !is_floating(in.dtype))
    fail<DTypeError>("separable_filter: input and output must have the same floating dtype, not ", name(in.dtype),
                     " and ", name(out.dtype));
  bool any = false;
  for (int a = 0; a < rank; ++a) {
    const AxisFilter& f = axes[a];
    if (f.identity()) {
      if (in.sizes[a] != out.sizes[a]) fail("separable_filter: identity filter on axis ", a, " of different sizes");
      continue;
    }
    any = true;
    if (f.size() != out.sizes[a] || static_cast<std::int64_t>(f.begin.size()) != f.size() + 1 || f.begin[0] != 0 ||
        f.begin.back() != static_cast<std::int64_t>(f.weights.size()))
      fail("separable_filter: axis ", a, " filter has ", f.size(), " outputs, ", f.begin.size(), " offsets and ",
           f.weights.size(), " weights for output size ", out.sizes[a]);
    for (std::int64_t o = 0; o < f.size(); ++o) {
      if (f.taps(o) < 1 || f.first[o] < 0 || f.first[o] + f.taps(o) > in.sizes[a])
        fail("separable_filter: axis ", a, " output ", o, " reads ", f.taps(o), " taps from index ", f.first[o],
             " of ", in.sizes[a]);
    }
  }
  return any;
}

}  // namespace

KernelPlan describe_separable_filter(const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes,
                                     const std::vector<int>& order) {
  if (!check_filters(in, out, axes))
    return describe_separable_gather(in, out, std::vector<AxisMap>(static_cast<std::size_t>(axes.size())));
  KernelPlan k;
  visit_float(in.dtype, [&](auto tag) {
    using Acc = AccOf<typename decltype(tag)::type>;
    const Plan<Acc> plan = make_plan<Acc>(in, out, axes, order);
    k = KernelPlan::of("filter",
                       order.empty() ? "one pass per resampled axis on each output tile, cheapest order first"
                                     : "one pass per resampled axis on each output tile, in the given order",
                       kernel_isa(KernelKind::Avx2), plan.tasks);
    bool pairs = false, taps = false;
    for (int a : plan.filtered) (plan.pairs[a].first.empty() ? taps : pairs) = true;
    if (pairs) k.reason += "; two-tap axes by the pairs kernel";
    if (taps) k.reason += "; wider filters tap by tap";
    for (std::size_t p = 0; p < plan.order.size(); ++p) k.tile("pass" + std::to_string(p + 1), plan.order[p]);
    for (int a : plan.filtered) k.tile("block" + std::to_string(a), plan.block[a]);
    k.tile("tile", plan.tile_elements);
    k.tile("grain", filter_grain(plan));
  });
  return k;
}

void separable_filter(const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes,
                      const std::vector<int>& order) {
  if (!check_filters(in, out, axes)) {
    // Nothing to filter: a strided copy.
    separable_gather(in, out, std::vector<AxisMap>(static_cast<std::size_t>(axes.size())), Scalar{in.dtype, 0});
    return;
  }
  visit_float(in.dtype, [&](auto tag) { run_filter<typename decltype(tag)::type>(in, out, axes, order); });
}

}  // namespace dmlops
