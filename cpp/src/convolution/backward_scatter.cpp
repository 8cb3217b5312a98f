// BACKWARD (transposed) as a GEMM and a col2im scatter, done without multiplying zeros: per (n,
// group, block of output channels), C[oc' * taps + t][i] = sum_ic W[ic, oc', t'] * x[n, ic, i]
// is one GEMM over the input positions i, then a col2im scatter adds C[oc' * taps + t][i] into
// output position i*stride + t*dil - start, as fold does: into planes with margins wide enough
// for every tap (cut off when the output is stored), or, when those margins would be large, into
// the output planes with the taps that fall outside dropped. A task owns its output channels'
// whole planes (an accumulator in the accumulation type), so no two threads write the same
// element, and the sums run in a fixed order (input blocks, then taps). The alternative, a
// forward convolution over a zero-inserted input, would multiply stride^D times more zeros than
// values and needs the output padding spelled out as extra zeros. Any backward layer; the list
// gives larger undilated float32 ones to backward_phases.
#include <algorithm>
#include <vector>

#include "algorithms.hpp"
#include "common.hpp"
#include "dmlops/core/gemm.hpp"
#include "dmlops/core/rows.hpp"

#if DMLOPS_X86
#include <immintrin.h>
#endif

namespace dmlops::conv {
namespace {

// A backward input panel stays in L2 (a quarter of it), a task's accumulator planes fill about
// one L2 (256 KiB and 1 MiB on Zen 4 and 5, where they were tuned).
std::int64_t backward_panel_bytes() { return platform::cache_sizes().l2 / 4; }
std::int64_t plane_bytes_per_task() { return platform::cache_sizes().l2; }
constexpr std::int64_t kSharedPanelBytes = 16 << 20;      // backward input panels packed up front, at most

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

// The window slides over the output; `end` is chosen so that there is exactly one block per
// input position (it is negative when the output is larger than the window reaches).
BlockWalker backward_walker(const Geometry& g) {
  std::vector<WindowAxis> axes(static_cast<std::size_t>(g.D));
  for (int a = 0; a < g.D; ++a) {
    WindowAxis& axis = axes[a];
    axis = WindowAxis{g.out_spatial[a], g.kernel[a], g.strides[a], g.dilations[a], g.start[a], 0};
    axis.end = (g.in_spatial[a] - 1) * g.strides[a] + g.extent[a] - g.out_spatial[a] - g.start[a];  // checked by analyse
  }
  return BlockWalker(std::move(axes));
}

// The accumulator planes and the blocking of a layer on num_threads() threads.
template <class Acc>
struct Blocking {
  static constexpr std::int64_t NR = gemm_columns<Acc>();
  std::int64_t taps, positions, out_positions, K;
  Dims padded;
  std::int64_t plane_size = 1;
  bool margins = true;
  std::int64_t per_task = 0, chunks = 0, tasks = 0, block = 0, grain = 0;

  Blocking(const Geometry& g, const BlockWalker& walker)
      : taps(walker.tap_count()), positions(walker.block_count()), out_positions(g.out_spatial.product()),
        K(g.in_per_group) {
    // A task sums into padded planes that hold every position a tap reaches (the output and the
    // margins that start padding and cropping cut off): then every (tap, input row) pair scatters
    // into one plain strided run, with no test for the borders, and the output is a box inside
    // (padded position q on axis a is output position q - start[a]). When the margins would be
    // large (an output cropped far inside the taps' reach, or strides that spread the taps far
    // apart) the planes are the output itself and the window walker drops what falls outside.
    padded = Dims::filled(g.D, 0);
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

    // Output channels per task: the accumulator planes fit plane_bytes_per_task(), and there are enough
    // tasks for every thread when the channels allow it.
    const std::int64_t plane_bytes = plane_size * static_cast<std::int64_t>(sizeof(Acc));
    per_task = std::clamp<std::int64_t>(plane_bytes_per_task() / plane_bytes, 1, g.out_per_group);
    per_task = std::max<std::int64_t>(1, std::min(per_task, ceil_div(g.batch * g.groups * g.out_per_group,
                                                                      4 * static_cast<std::int64_t>(num_threads()))));
    chunks = ceil_div(g.out_per_group, per_task), tasks = g.batch * g.groups * chunks;
    const std::int64_t fit = std::max<std::int64_t>(NR, backward_panel_bytes() / (K * static_cast<std::int64_t>(sizeof(Acc))) / NR * NR);
    block = std::min(fit, round_up(positions, NR));
    grain = std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, per_task * taps * K * positions));
  }
};

template <class T>
void run_typed(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = typename AccumulatorOf<T>::type;
  constexpr std::int64_t NR = gemm_columns<Acc>();
  const BlockWalker walker = backward_walker(g);
  const Blocking<Acc> blocking(g, walker);
  const std::int64_t taps = blocking.taps, positions = blocking.positions, out_positions = blocking.out_positions;
  const std::int64_t K = blocking.K, plane_size = blocking.plane_size, per_task = blocking.per_task;
  const std::int64_t chunks = blocking.chunks, tasks = blocking.tasks, block = blocking.block, grain = blocking.grain;
  const Dims& padded = blocking.padded;
  const bool margins = blocking.margins;
  const bool flip = desc.mode == ConvolutionMode::Convolution;

  const AccFilter<T> acc_filter(v.filter);
  const TensorView& filter = acc_filter.view();
  const Taps tap(walker, filter);

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

Verdict applies(const Geometry& g, const Cpu&) {
  if (g.direction != ConvolutionDirection::Backward) return {false, "a backward algorithm"};
  return {true, "any backward layer"};
}

void describe(const Geometry& g, ConvolutionPlan& plan) {
  visit_float(g.dtype, [&](auto tag) {
    using Acc = typename AccumulatorOf<typename decltype(tag)::type>::type;
    const Blocking<Acc> b(g, backward_walker(g));
    plan.tiles = {{"MR", kGemmRows}, {"NR", b.NR}, {"K", b.K}, {"position_block", b.block},
                  {"channels_per_task", b.per_task}, {"plane", b.plane_size}, {"margins", b.margins ? 1 : 0}};
    plan.tasks = b.tasks;
  });
}

void run(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  visit_float(g.dtype, [&](auto tag) { run_typed<typename decltype(tag)::type>(desc, g, v); });
}

}  // namespace

const Algorithm kBackwardScatter{"backward_scatter", applies, describe, run, nullptr};

}  // namespace dmlops::conv
