// FORWARD as a GEMM (im2col): per (n, group) and per block of output positions, the sums
//   y[oc'][p] = sum over ic', t of W[oc', ic', t] * x[n, g*ICg + ic', position read by tap t of p]
// in increasing (ic', t), then the bias, the activation and the store into the strided output.
// It packs the im2col panel
//   B[ic' * taps + t][p] = x[n, g*ICg + ic', position read by tap t of output position p]
// (pieces of rows of the padded planes, or the input itself when it needs no padding) and
// multiplies it by the packed filter A[oc'][ic' * taps + t] (core/gemm.hpp). Tasks are (n,
// group, position block, output-channel block): disjoint outputs, whole reductions. Any forward
// layer; the list leaves it the float64 layers, the float ones with few output channels per
// group and the pointwise ones with few input channels (see direct.cpp).
#include <algorithm>
#include <optional>
#include <vector>

#include "algorithms.hpp"
#include "common.hpp"
#include "dmlops/core/gemm.hpp"

namespace dmlops::conv {
namespace {

// A forward im2col panel: with A's K block, about L2 (three quarters of it: 768 KiB on Zen 4 and 5).
std::int64_t panel_bytes() { return platform::cache_sizes().l2 * 3 / 4; }
// A task's sums, which finish_row reads back for the bias, the activation and the store: a quarter
// of L2, so that they are read from there, not from memory.
std::int64_t result_bytes() { return platform::cache_sizes().l2 / 4; }
// The deepest K whose sums the tiles write straight into an output of contiguous planes rather
// than into `result` and then copy: staging and copying them cost 1x1 64>256@56 a quarter of its
// time, and in place it ran 4% faster, 128>512@28 10-13% and 64>64@56 7% (Intel Xeon, 1 thread);
// with K = 256, 256>64@56 ran 8% slower in place, its longer tiles' stores less hidden.
constexpr std::int64_t kInPlaceDepth = 128;
// ... and the fewest output channels per group, unless they are whole panels: a last partial
// panel is a second product, which packs B again (3x3 32>32 in 4 groups, 8 channels each, ran
// 5-11% slower in place on the 16-core Xeon).
constexpr std::int64_t kInPlaceRows = 8 * kGemmRows;
constexpr std::int64_t kMinBlock = 128;           // forward positions per task, at least
constexpr std::int64_t kMinChannelBlock = 48;     // output channels per forward task, at least

// The blocking of a layer on num_threads() threads.
template <class Acc>
struct Blocking {
  static constexpr std::int64_t NR = gemm_columns<Acc>();
  std::int64_t taps, positions, K, M, M_pad;
  std::int64_t position_panels = 0, blocks = 0, channel_blocks = 0, channel_block = 0;
  bool shared_b = false, inline_a = false;
  std::int64_t block = 0, outer = 0, tasks = 0, grain = 0;

  Blocking(const Geometry& g, const BlockWalker& walker)
      : taps(walker.tap_count()), positions(walker.block_count()), K(g.in_per_group * taps), M(g.out_per_group),
        M_pad(round_up(M, kGemmRows)) {
    // Position blocks: whole micro-panels, spread evenly (their sizes differ by at most NR), whose
    // im2col panel fits panel_bytes() (at least kMinBlock positions, so that A, streamed once per
    // task, is reused).
    const std::int64_t fit = std::max(kMinBlock, std::min(panel_bytes() / (K * static_cast<std::int64_t>(sizeof(Acc))),
                                                          result_bytes() / (M_pad * static_cast<std::int64_t>(sizeof(Acc)))));
    position_panels = ceil_div(positions, NR);
    blocks = ceil_div(positions, fit);
    // Output-channel blocks (multiples of kGemmRows) only when (batch, group, position block)
    // tasks are too few for the threads. The blocks change which tile computes an element, never
    // its sum, so the results do not depend on them.
    const std::int64_t threads = num_threads();
    channel_blocks = 1;
    if (g.batch * g.groups * blocks < 2 * threads)
      channel_blocks = std::min(ceil_div(2 * threads, g.batch * g.groups * blocks), std::max<std::int64_t>(1, M_pad / kMinChannelBlock));
    channel_block = round_up(ceil_div(M, channel_blocks), kGemmRows);
    channel_blocks = ceil_div(M, channel_block);
    // With several channel blocks per position block, every position block's B is packed once,
    // up front, by all threads together, and shared by its channel blocks' tasks (packing it in
    // each task would repeat the copy per channel block and leave the threads waiting on it).
    shared_b = channel_blocks > 1;
    // Else each task packs its whole panel, then multiplies it. (Packing it inside the product,
    // two micro-panels at a time in L1, was slower where A has few panels to pass over each
    // piece: on a Zen 5 at 1 thread 1x1 64>64@56 took 0.139 ms so and 0.116 ms packed whole, 3x3
    // 32>32 in 4 groups 0.86x the time.) The count of position blocks is then raised, if need
    // be, until the (equal) tasks spread evenly over the threads; never lowered: each panel must
    // fit.
    if (!shared_b) blocks = balanced_count(g.batch * g.groups, blocks, threads, false);
    // Still too few tasks when the channel blocks ran out (few output channels, and a panel bound
    // that a large L2 raises: 1x1 64>256@56 had 5 tasks for 16 threads with a 2 MiB L2): more,
    // smaller position blocks, down to kMinBlock positions.
    const std::int64_t per_position_block = g.batch * g.groups * channel_blocks;
    if (threads > 1 && per_position_block * blocks < 2 * threads)
      blocks = std::max(blocks, std::min(ceil_div(2 * threads, per_position_block), positions / kMinBlock));
    blocks = std::min(blocks, position_panels);
    block = NR * ceil_div(position_panels, blocks);  // the largest
    outer = g.batch * g.groups * blocks, tasks = outer * channel_blocks;
    grain = std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, 2 * channel_block * K * block));
    // A larger A (its K block past gemm_block_bytes()) used by one task only (one batch item,
    // one position block: e.g. 3x3 512@7, whose filter is 9 MB) is packed inside the product, a
    // K block of an L2 block of rows at a time, instead of being written out whole and read
    // back; else once, up front, in parallel.
    const bool large_a = channel_block * kGemmDepth * std::int64_t{sizeof(Acc)} > gemm_block_bytes();
    inline_a = (shared_b || large_a) && g.batch * blocks == 1;
  }
};

// The filter as the GEMM's A, group by group: row oc' (of M), column ic' * taps + t.
template <class T>
struct FilterA {
  using Acc = typename AccumulatorOf<T>::type;
  std::int64_t M, groups;
  AccFilter<T> acc_filter;
  Taps tap;
  FilterMatrix<Acc> matrix;

  FilterA(const ConvolutionDesc& desc, const Geometry& g, const BlockWalker& walker, const TensorView& filter)
      : M(g.out_per_group), groups(g.groups), acc_filter(filter), tap(walker, acc_filter.view()),
        matrix(g, acc_filter.view(), tap, desc.mode == ConvolutionMode::Convolution) {}

  // Packs rows [row0, row0 + count) of group grp's A, columns [k0, k0 + depth), as pack_gemm_a does.
  void pack(std::int64_t grp, std::int64_t row0, std::int64_t count, std::int64_t k0, std::int64_t depth, Acc* dst) const {
    const std::int64_t oc = grp * M + row0;
    if (matrix.dense) return pack_gemm_a_rows(count, depth, matrix.dense_row(oc) + k0, matrix.ld, dst);
    pack_gemm_a(count, depth, [&](std::int64_t r, std::int64_t k) { return matrix.at(oc + r, k0 + k); }, dst);
  }
  // Every group's whole A (group grp's at dst + grp * M_pad * K), in parallel.
  void pack_all(std::int64_t K, std::int64_t M_pad, Acc* dst) const {
    const std::int64_t panels = M_pad / kGemmRows;
    parallel_for(0, groups * panels, std::max<std::int64_t>(1, (1 << 16) / (kGemmRows * K)), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t task = begin; task < end; ++task) {
        const std::int64_t grp = task / panels, p = task % panels * kGemmRows;
        pack(grp, p, std::min(kGemmRows, M - p), 0, K, dst + (grp * M_pad + p) * K);
      }
    });
  }
};

template <class T>
void run_typed(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = typename AccumulatorOf<T>::type;
  constexpr std::int64_t NR = gemm_columns<Acc>();
  const BlockWalker walker = forward_walker(g);
  const Blocking<Acc> blocking(g, walker);
  const std::int64_t taps = blocking.taps, positions = blocking.positions, K = blocking.K, M = blocking.M;
  const std::int64_t M_pad = blocking.M_pad, position_panels = blocking.position_panels, blocks = blocking.blocks;
  const std::int64_t channel_blocks = blocking.channel_blocks, channel_block = blocking.channel_block;
  const bool shared_b = blocking.shared_b;
  const std::int64_t block = blocking.block, outer = blocking.outer, tasks = blocking.tasks, grain = blocking.grain;

  // The filter as A, unless it comes packed (then neither widened nor packed here).
  const Acc* prepacked = v.packed ? v.packed->data<Acc>() : nullptr;
  std::optional<FilterA<T>> a_matrix;
  if (!prepacked) a_matrix.emplace(desc, g, walker, v.filter);
  const Taps tap(walker, v.filter);  // for the padded planes: tap.index only
  const auto block_start = [&](std::int64_t b) { return std::min(positions, NR * (position_panels * b / blocks)); };

  const Dims out_strides = spatial(v.out.byte_strides);
  const bool in_place = K <= kInPlaceDepth && (M % kGemmRows == 0 || M >= kInPlaceRows) && std::is_same_v<T, Acc> && planes_contiguous<Acc>(v.out);
  auto* out_base = static_cast<std::byte*>(v.out.data);

  // The biases of every group's rows (zeros past M in its M_pad), which the tiles add as they
  // store the sums; a relu goes into the tiles' epilogue too, other activations run over the
  // stored sums.
  const std::vector<Acc> biases = group_biases<T, Acc>(v.bias, g, M_pad);
  const TileActivation activation(desc);

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
  // Columns [j, j + columns) of a located B, as micro-panels at dst.
  const auto pack_columns = [K](const std::vector<GemmPiece>& pieces, const std::vector<const Acc*>& sources,
                                std::int64_t j, std::int64_t columns, Acc* dst) {
    const auto by_column = [](const GemmPiece& piece, std::int64_t column) { return piece.column < column; };
    const auto first = std::lower_bound(pieces.begin(), pieces.end(), j, by_column);
    const auto stop = std::lower_bound(first, pieces.end(), j + columns, by_column);
    pack_gemm_b_gather(K, sources.data(), pieces.data() + (first - pieces.begin()), stop - first, j, columns, dst);
  };

  // Unless inline_a, every group's A once, up front, in parallel (or once for all calls: packed).
  const bool inline_a = blocking.inline_a && !prepacked;
  const Scratch<Acc> packing(inline_a || prepacked ? 0 : g.groups * M_pad * K);
  if (!inline_a && !prepacked) a_matrix->pack_all(K, M_pad, packing.get());
  const Acc* packed = prepacked ? prepacked : packing.get();
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
          pack_columns(pieces, sources, q0 * NR, j1 - q0 * NR, shared.get() + position_task * K * block + q0 * NR * K);
        i += q1 - q0;
      }
    });
  }
  parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    // Consecutive tasks of one position block (channel blocks vary fastest) reuse the packed panel.
    std::vector<GemmPiece> pieces;
    std::vector<const Acc*> sources;
    const Scratch<Acc> own_panel(shared_b ? 0 : K * block);
    const Scratch<Acc> result(channel_block * block);
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
        pack_columns(pieces, sources, 0, width, own_panel.get());
      }
      const std::int64_t rows = std::min(channel_block, M - m0);
      const Acc* a = inline_a ? nullptr : packed + (grp * M_pad + m0) * K;
      // The product of rows [r0, r0 + panel_rows) (whole panels) and columns [j0, j0 + columns)
      // (whole micro-panels) of this task's block into c, the epilogue applied.
      const auto product = [&](std::int64_t r0, std::int64_t panel_rows, std::int64_t j0, std::int64_t columns, Acc* c,
                               std::int64_t ldc) {
        const GemmEpilogue<Acc> epilogue{v.bias ? biases.data() + grp * M_pad + m0 + r0 : nullptr, activation.relu};
        if (inline_a) {
          const GemmPackA<Acc> pack_rows = [&](std::int64_t k0, std::int64_t depth, std::int64_t r, std::int64_t n, Acc* dst) {
            a_matrix->pack(grp, m0 + r0 + r, std::min(n, rows - r0 - r), k0, depth, dst);
          };
          gemm_pack_a_inline(panel_rows, columns, K, pack_rows, panel + j0 * K, c, ldc, epilogue);
        } else {
          gemm_packed(panel_rows, columns, K, a + r0 * K, panel + j0 * K, c, ldc, epilogue);
        }
      };
      std::byte* first_plane = out_base + n * v.out.byte_strides[0] + (grp * M + m0) * v.out.byte_strides[1];
      // The activation (unless the tiles applied it) and the store of rows [r0, r1) of results of
      // columns [j0, j1).
      const auto finish = [&](Acc* result_rows, std::int64_t ld, std::int64_t r0, std::int64_t r1, std::int64_t j0,
                              std::int64_t j1) {
        for (std::int64_t i = r0; i < r1; ++i) {
          finish_row<T, Acc>(result_rows + (i - r0) * ld, j1 - j0, Acc(0), activation.after,
                             first_plane + i * v.out.byte_strides[1], g.out_spatial, out_strides, p0 + j0);
        }
      };
      // Whole tiles straight into the output when its planes are contiguous and K is short (see
      // kInPlaceDepth); the edge tiles, which would write past this task's rows or positions,
      // through `result`. The same tiles and sums either way, so the same bits.
      const std::int64_t whole_rows = in_place ? rows / kGemmRows * kGemmRows : 0;
      const std::int64_t whole_columns = in_place ? count / NR * NR : 0;
      if (whole_rows > 0 && whole_columns > 0) {
        Acc* c = reinterpret_cast<Acc*>(first_plane) + p0;
        const std::int64_t ldc = v.out.byte_strides[1] / std::int64_t{sizeof(Acc)};
        product(0, whole_rows, 0, whole_columns, c, ldc);
        if (activation.after) {
          for (std::int64_t i = 0; i < whole_rows; ++i) apply_activation(*activation.after, c + i * ldc, whole_columns);
        }
        if (whole_columns < count) {  // the last micro-panel, every row
          product(0, round_up(rows, kGemmRows), whole_columns, NR, result.get(), NR);
          finish(result.get(), NR, 0, rows, whole_columns, count);
        }
        if (whole_rows < rows) {  // the last panel, the whole micro-panels
          product(whole_rows, kGemmRows, 0, whole_columns, result.get(), whole_columns);
          finish(result.get(), whole_columns, whole_rows, rows, 0, whole_columns);
        }
      } else {
        product(0, round_up(rows, kGemmRows), 0, width, result.get(), width);
        finish(result.get(), width, 0, rows, 0, count);
      }
    }
  });
}

Verdict applies(const Geometry& g, const Cpu&) {
  if (g.direction != ConvolutionDirection::Forward) return {false, "a forward algorithm"};
  return {true, "any forward layer"};
}

void describe(const Geometry& g, ConvolutionPlan& plan) {
  visit_float(g.dtype, [&](auto tag) {
    using Acc = typename AccumulatorOf<typename decltype(tag)::type>::type;
    const Blocking<Acc> b(g, forward_walker(g));
    plan.tiles = {{"MR", kGemmRows}, {"NR", b.NR}, {"K", b.K}, {"K_block", kGemmDepth},
                  {"position_block", b.block}, {"position_blocks", b.blocks}, {"channel_block", b.channel_block},
                  {"channel_blocks", b.channel_blocks}};
    plan.tasks = b.tasks;
  });
}

void run(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  visit_float(g.dtype, [&](auto tag) { run_typed<typename decltype(tag)::type>(desc, g, v); });
}

// Every group's A, as run() packs it when it packs it whole.
void pack(const ConvolutionDesc& desc, const Geometry& g, const TensorView& filter, PackedFilter& packed) {
  visit_float(g.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = typename AccumulatorOf<T>::type;
    const BlockWalker walker = forward_walker(g);
    const std::int64_t K = g.in_per_group * walker.tap_count(), M_pad = round_up(g.out_per_group, kGemmRows);
    auto& values = packed.values<Acc>();
    values.resize(static_cast<std::size_t>(checked_mul(g.groups * M_pad, K, kOp, ": the packed filter's element count")));
    FilterA<T>(desc, g, walker, filter).pack_all(K, M_pad, values.data());
  });
}

}  // namespace

const Algorithm kGemm{"gemm", applies, describe, run, pack};

}  // namespace dmlops::conv
