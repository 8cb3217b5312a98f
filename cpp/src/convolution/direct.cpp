// FORWARD, dense layers of float sums, direct (core/direct.hpp): no im2col panel. The output
// channels of a group are cut into blocks of `vectors` x L (direct_vectors() vectors, or 2 where
// wide blocks leave threads idle, while that many remain, then 2, then 1); a block's filter is
// packed once, [k][o]. A task is (n, group,
// band of consecutive output positions, channel block): per pass over some input channels
// (whose packed filter stays in L1 or L2: direct_pass_channels()), direct_window_product adds their terms
// to the band's interleaved sums (position-major, `width` channels), every output reading its
// window in the padded planes at row_base + column: output channels in the vector lanes, every
// input value broadcast from the padded planes, no im2col copy. The last pass's tiles add the
// bias and apply a relu as they store the sums (other activations go on in place after), and
// store_lanes moves the channels into the output. The sums run in the GEMM's
// order (the same FMAs in the same order, so the same bits), so they do not depend on the bands,
// the blocks or the thread count.
#include <algorithm>
#include <optional>
#include <vector>

#include "algorithms.hpp"
#include "common.hpp"
#include "dmlops/core/direct.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/plan.hpp"

namespace dmlops::conv {
namespace {

constexpr std::int64_t kCacheLine = 64;  // bytes

// The input channels of a direct pass, whose packed filter is read once per tile. At two vector
// FMAs per cycle it must come from L1, next to the tile's input lines and sums: half an L1 for
// window layers (on the 16-core Xeon 3x3 layers ran 8-14% faster so than with a whole one). A
// pointwise tile reads a new input line per channel, and the line after it (pointwise_tile's
// prefetch): its passes keep the filter and those two lines per channel in three eighths of L1.
// That is 48 channels of 64 weights on the 16-core Xeon (AVX-512, 48 KiB of L1: 1x1 layers
// 8-22% faster than with passes of half an L1) and 64 of 16 on Zen 3 (AVX2, 32 KiB), where
// passes of 128 left the tiles waiting on their 128 input streams: paired, 1x1 256>64@56 0.88x
// the time at 1 thread and 0.86x at 2, 512>128@28 0.93x at both, s2 256>512@56 0.93x and
// 0.94x, s2 1024>2048@14 0.94x and 0.97x, the other ResNet 1x1 layers 0.97-1.00x. The 16-core
// Xeon's AVX2 kernels (96 channels, not 192), pinned, paired: 256>64@56 0.87x the time at 1
// thread, 512>128@28 0.94x, the others 0.98-1.02x; 0.85-0.98x at 16 threads, 0.93-1.05x at 4.
// At one FMA per cycle (Zen 4's AVX-512) L2 keeps up with the tiles, and every pass costs each
// tile a load and a store of its sums and a pipeline's start and end: a filter of up to half of
// L2, few long passes (a tile alone, its filter in L2, ran at 97% of the FMA peak with 14
// channels a pass, 100% with 56 or more). Zen 4, paired against passes of a whole L1: 3x3
// layers 0.92-0.98x the time at 1 thread (prepared filters 0.97-0.98x), 1x1 0.97-0.99x; 3x3
// and 1x1 0.97-0.99x at 2 threads.
// Zen 5's L2 keeps up with its two FMAs per cycle as well (CpuFeatures::avx512_l2_fed): windows
// of up to 3 rows (3x3) take passes of half an L2 there. Paired (old and new builds alternating),
// prepared, against passes of half an L1: 3x3 64@56 to 512@7 0.98-0.99x the time at 1 thread and
// 0.94-1.01x at 2, s2 layers 0.97-0.99x at both, batch-8 128@28 0.98x and 0.99x, 3x3 32@112
// 0.97x, float16 64@56 0.99x. Windows of more rows keep L1 passes, whose tiles' input rows then
// stay in L1 (3x3x3 32@16 ran 1.03-1.04x the time with L2 passes). Pointwise passes there hold
// their filter and their band's input (band_positions floats per channel) in three quarters of
// L2: with the filter alone in half of it, 1x1 2048>512@7 (49 positions, one pass of 2048
// channels) ran 1.05x and 1.10x the time at 1 and 2 threads; so, the ResNet 1x1 layers that
// run direct 0.96-0.99x at 1 thread and 0.98-1.00x at 2 (batch 8 0.97x and 0.98x). On the
// 16-core Xeon, L2 passes ran 3x3 layers 0.98-1.01x the time at 1 thread, s2 512@14 1.02-1.04x,
// and at 16 threads 3x3 256@14, 512@7 and s2 512@14 1.01-1.10x; 1x1 layers 1.02-1.12x at 1.
std::int64_t direct_pass_channels(std::int64_t taps, std::int64_t window_rows, std::int64_t width,
                                  std::int64_t band_positions) {
  const std::int64_t filter_bytes = taps * width * std::int64_t{sizeof(float)};
  const std::int64_t l1 = platform::cache_sizes().l1d, l2 = platform::cache_sizes().l2;
  const bool l2_fed = avx512_enabled() && platform::cpu_features().avx512_l2_fed;
  if (vector_fmas_per_cycle() == 1 || (l2_fed && taps > 1 && window_rows <= 3)) return l2 / 2 / filter_bytes;
  // (A band longer than L2 holds leaves passes of one channel, whatever its length.)
  if (l2_fed && taps == 1)
    return l2 / 4 * 3 / (filter_bytes + std::min(band_positions, l2) * std::int64_t{sizeof(float)});
  return taps == 1 ? l1 * 3 / 8 / (filter_bytes + 2 * kCacheLine) : l1 / 2 / filter_bytes;
}
// A direct task's sums stay in L2: an eighth of it (128 KiB on Zen 4 and 5, where it was tuned).
std::int64_t direct_band_bytes() { return platform::cache_sizes().l2 / 8; }
constexpr std::int64_t kDirectMinBand = 24;             // positions: four 6-position tiles
constexpr std::int64_t kDirectSpareBand = 192;          // positions: 32 six-position tiles
constexpr std::int64_t kDirectTasksPerThread = 4;
constexpr std::int64_t kDirectPointwiseChannels = 128;  // input channels a 1x1 layer needs to run direct
// ... on more threads than this, with exactly kDirectPointwiseChannels (the GEMM then writes its
// sums straight into the output: on the 16-core Xeon 1x1 128>512@28 ran 1.27x, 1.12x and 1.12x as
// fast as direct on 1, 2 and 4 threads, 1.26x and 1.16x on 1 and 2 of a 2-core Xeon, and direct
// won by 1.09x and 1.42x on 8 and 16 threads: direct splits its filter over more tasks).
constexpr int kDirectFewThreads = 4;
constexpr std::int64_t kDirectPackColumns = 64;         // filter columns packed per task

struct ChannelBlock {
  std::int64_t first, vectors;  // first output channel in the group
};

// The blocking of a layer on num_threads() threads.
struct Blocking {
  using Acc = float;
  std::int64_t L = simd_lanes<Acc>(), most = direct_vectors();
  std::vector<ChannelBlock> blocks;
  std::int64_t block_count = 0, padded_M = 0;
  std::int64_t positions = 0, max_width = 0, per_band = 0, bands = 0, band_max = 0, channel_pass = 0;
  bool pack_in_pass = false;
  std::int64_t tasks = 0, grain = 0;

  explicit Blocking(const Geometry& g) {
    const std::int64_t taps = g.kernel.product(), M = g.out_per_group, K = g.in_per_group * taps;
    const std::int64_t threads = num_threads();
    // Too few blocks of `most` vectors for the threads, in a layer whose filter outweighs its
    // input (small planes, many channels: 3x3 512@7, 256@14): blocks of 2 vectors give the
    // threads tasks that split the filter rather than bands that each read all of it again.
    // On the 16-core Xeon it made 3x3 512@7, s2 512@14 and 1x1 2048>512@7 14-23% faster at 8
    // threads and 8-14% at 16; with a filter under twice the input (3x3 128@28, 1x1 1024>256@14,
    // batch 8) the narrower tiles were 6-11% slower.
    if (most > 2 && g.batch * g.groups * ceil_div(ceil_div(M, L), most) < 2 * threads &&
        K * M >= 2 * g.in_per_group * g.in_spatial.product())
      most = 2;
    for (std::int64_t first = 0, left = ceil_div(M, L); left > 0;) {
      const std::int64_t vectors = left >= most ? most : left >= 2 ? 2 : 1;
      blocks.push_back({first, vectors});
      first += vectors * L, left -= vectors;
    }
    block_count = std::ssize(blocks), padded_M = ceil_div(M, L) * L;
    // Bands of consecutive output positions, about direct_band_bytes() of sums each, but at least one
    // task per thread (a small layer on many threads: 3x3 64@56 has 7 bands of that size, for 16
    // threads) while bands keep kDirectMinBand positions, as many as spread the tasks evenly over
    // the threads. No more short ones: every band reads its blocks' filter again, and on the 16-core Xeon two
    // tasks per thread made 3x3 256@14 40%, s2 256@28 27%, 1x1 1024>256@14 20% and 3x3 512@7 11%
    // slower at 16 threads than one (no layer was faster; a third per thread gained nothing).
    positions = g.out_spatial.product();
    max_width = most * L, per_band = g.batch * g.groups * block_count;
    bands = ceil_div(positions * max_width * std::int64_t{sizeof(Acc)}, direct_band_bytes());
    bands = std::max(bands, std::min(ceil_div(threads, per_band), positions / kDirectMinBand));
    // Spare tasks, up to kDirectTasksPerThread per thread, while bands keep kDirectSpareBand
    // positions (their filter passes are read again per band, and a short band pays that on
    // few positions): a thread that is held back (descheduled, or slowed by its neighbours)
    // then leaves its share to the others rather than holding up the call. On the 16-core
    // Xeon, paired: batch-8 3x3 128@28 14% faster at 16 threads, batch-2 14% at 4; no layer slower.
    bands = std::max(bands, std::min(ceil_div(kDirectTasksPerThread * threads, per_band), positions / kDirectSpareBand));
    bands = std::clamp<std::int64_t>(balanced_count(per_band, bands, threads), 1, positions);
    band_max = ceil_div(positions, bands);
    // Input channels per pass: at most direct_pass_channels(), in passes of near-equal size
    // (3x3 512@7 on Zen 4: 3 passes of 171 channels, not 227, 227 and 58).
    const std::int64_t window_rows = taps / g.kernel.back();
    const std::int64_t most_channels =
        std::clamp<std::int64_t>(direct_pass_channels(taps, window_rows, max_width, band_max), 1, g.in_per_group);
    channel_pass = ceil_div(g.in_per_group, ceil_div(g.in_per_group, most_channels));
    // A block's filter used by one task only (one batch item, one band: e.g. 3x3 512@7 on a few
    // threads, whose filter is 9 MB) is packed by that task as it goes, a pass at a time; so is
    // one used by two tasks when the filter is larger than L2 (packed up front it would go out
    // to L3 and come back twice, after a barrier: 3x3 512@7 and 1x1 2048>512@7 at 16 threads
    // 10-14% faster so), and a pointwise layer's at any count of tasks: on the 16-core Xeon,
    // paired, 1x1 1024>256@14 ran 0.64x the time at 16 threads and 0.83x at 8, 512>128@28 0.84x
    // and 0.75x, 128>512@28 0.80x and 0.84x, batch-8 1024>256@14 0.89x and 0.94x; no pointwise
    // layer slower at 4 to 16 threads.
    // (Window layers were not faster: at 8 threads 8-15% slower.) Else every block's once, up
    // front, by all threads (group grp's block at packed + (grp * padded_M + first) * K), and
    // shared.
    const std::int64_t readers = g.batch * bands;
    pack_in_pass = readers == 1 || taps == 1 ||
                   (readers == 2 && K * M * g.groups * std::int64_t{sizeof(Acc)} > platform::cache_sizes().l2);
    tasks = per_band * bands;
    grain = std::max<std::int64_t>(1, kMinTaskFlops / std::max<std::int64_t>(1, 2 * K * max_width * band_max));
  }
};

// The filter as direct_window_product reads it: per group and block of output channels, [k][o].
template <class T>
struct FilterBlocks {
  using Acc = float;
  std::int64_t M, L;
  AccFilter<T> acc_filter;
  Taps tap;
  FilterMatrix<Acc> matrix;

  FilterBlocks(const ConvolutionDesc& desc, const Geometry& g, const BlockWalker& walker, const TensorView& filter,
               std::int64_t lanes)
      : M(g.out_per_group), L(lanes), acc_filter(filter), tap(walker, acc_filter.view()),
        matrix(g, acc_filter.view(), tap, desc.mode == ConvolutionMode::Convolution) {}

  // Columns [k0, k0 + depth) of group grp's block, as direct_window_product reads them ([k][o]).
  void pack(std::int64_t grp, const ChannelBlock& block, std::int64_t k0, std::int64_t depth, Acc* dst) const {
    const std::int64_t oc = grp * M + block.first, width = block.vectors * L, used = std::min(width, M - block.first);
    if (matrix.dense) return pack_direct_filter(matrix.dense_row(oc) + k0, matrix.ld, used, depth, width, dst);
    matrix.gather_columns(oc, used, k0, depth, width, dst);
  }
  // The same columns into L2, ahead of pack: where passes fit in L1, each row's piece is a few
  // cache lines, 18 KB from the next row's (3x3 512@7), too short a run for the hardware
  // prefetcher, so packing them pass by pass would wait on L3 or memory for every line (a third
  // of such a layer's time). (Zen 4's passes of half an L2 read 6 KB runs, and still ran 3x3
  // 512@7 and s2 512@14 2-3% faster with them fetched ahead.)
  // Every line: a piece that does not start on a line ends in one more line than its length
  // fills (left out, the pack waited on the last line of every row: 3x3 512@7 and s2 512@14
  // 5-8% slower on Zen 4).
  void prefetch(std::int64_t grp, const ChannelBlock& block, std::int64_t k0, std::int64_t depth) const {
    if (!matrix.dense || depth <= 0) return;
    const std::int64_t oc = grp * M + block.first, used = std::min(block.vectors * L, M - block.first);
    for (std::int64_t o = 0; o < used; ++o) {
      const Acc* row = matrix.dense_row(oc + o) + k0;
      for (std::int64_t k = 0; k < depth; k += kCacheLine / std::int64_t{sizeof(Acc)}) DMLOPS_PREFETCH(row + k);
      DMLOPS_PREFETCH(row + depth - 1);
    }
  }
  // Every block's filter, by all threads: group grp's block at dst + (grp * padded_M + first) * K.
  void pack_all(const Geometry& g, const Blocking& b, std::int64_t K, Acc* dst) const {
    // In pieces of kDirectPackColumns columns, so that one block's filter (all a 64-channel
    // layer has) is packed by every thread too.
    const std::int64_t pieces = ceil_div(K, kDirectPackColumns), block_count = b.block_count;
    parallel_for(0, g.groups * block_count * pieces, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const std::int64_t grp = i / (block_count * pieces), k0 = i % pieces * kDirectPackColumns;
        const ChannelBlock& block = b.blocks[static_cast<std::size_t>(i / pieces % block_count)];
        const std::int64_t width = block.vectors * L;
        pack(grp, block, k0, std::min(kDirectPackColumns, K - k0), dst + (grp * b.padded_M + block.first) * K + k0 * width);
      }
    });
  }
};

// Whether each task pads the input rows it reads, pass by pass, into its own L1-sized buffer,
// instead of all threads padding every plane in a step before the tasks (when the input `in`
// needs padded planes at all: they are not its own planes, and it is NCHW). Planes made up
// front are written by one core and read by the others (every task reads every channel of its band), so at 16
// threads that step took 11-30 us for stride-1 layers and 29-70 us for stride-2 layers on the
// 16-core Xeon, where a copy of its bytes takes a few; a task's own rows stay in its caches, and
// it reads the input that every call shares. The price: a band's rows are padded once per
// channel block, and their halo rows once per band, so only layers of one or two blocks per
// group (16-core Xeon, 16 threads, paired: 3x3 128@28 0.84x the time, s2 128@56 0.83x, float16
// 64@56 0.86x, 64@56 0.95x; at 4 threads 0.95-1.04x; with up to four blocks 3x3 256@14 ran 1.13x
// the time on 2 threads of a 2-core Xeon, and with every block count 1x1 s2 512>1024@28 1.8x).
// On one thread the planes are made once. Two spatial axes (bands of whole rows of one plane).
constexpr std::int64_t kMaxBlocksPaddingInTasks = 2;

template <class T>
bool pads_in_tasks(const Geometry& g, const Blocking& b, const PaddedPlane& pad, const TensorView& in) {
  return g.D == 2 && num_threads() > 1 && b.tasks > 1 && b.block_count <= kMaxBlocksPaddingInTasks &&
         !PaddedInput<T>::reads_in_place(g, pad, in) && !PaddedInput<T>::channels_last(g, in);
}

// Padded rows that output rows [first, first + count) of a 2-D layer read.
std::int64_t padded_rows(const Geometry& g, const PaddedPlane& pad, std::int64_t first, std::int64_t count) {
  const std::int64_t r0 = first * g.strides[0];
  return std::min((count - 1) * g.strides[0] + (g.kernel[0] - 1) * g.dilations[0] + 1, pad.rows - r0);
}

template <class T>
void run_typed(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  using Acc = float;
  const BlockWalker walker = forward_walker(g);
  const std::int64_t taps = walker.tap_count(), M = g.out_per_group, K = g.in_per_group * taps;
  const Blocking blocking(g);
  const std::int64_t L = blocking.L, block_count = blocking.block_count, padded_M = blocking.padded_M;
  const std::int64_t bands = blocking.bands, band_max = blocking.band_max, channel_pass = blocking.channel_pass;
  const std::int64_t max_width = blocking.max_width, positions = blocking.positions;
  const std::vector<ChannelBlock>& blocks = blocking.blocks;
  // The filter's blocks, unless they come packed (then neither widened nor packed here).
  const Acc* prepacked = v.packed ? v.packed->data<Acc>() : nullptr;
  std::optional<FilterBlocks<T>> filter_blocks;
  if (!prepacked) filter_blocks.emplace(desc, g, walker, v.filter, L);
  const Taps tap(walker, v.filter);  // for the padded planes: tap.index only
  const PaddedPlane pad(g, tap, false);
  // The padded planes: made up front, in a parallel step of their own, or by each task, pass by
  // pass, for the rows of its band (pads_in_tasks).
  const bool in_tasks = pads_in_tasks<T>(g, blocking, pad, v.in);
  std::optional<PaddedInput<T>> input;
  if (!in_tasks) input.emplace(g, pad, v.in, true);
  const std::int64_t step = in_tasks ? 1 : input->position_step();
  std::vector<std::int64_t> tap_offsets(pad.tap_offset);
  for (std::int64_t& offset : tap_offsets) offset *= step;
  const auto band_start = [&](std::int64_t b) { return positions * b / bands; };
  // A task's padded rows: those of its band's output rows, at most band_rows of each plane.
  const std::int64_t band_rows = in_tasks ? padded_rows(g, pad, 0, std::min(ceil_div(band_max - 1, pad.out_width) + 1, g.out_spatial[0])) : 0;
  const Dims in_strides = spatial(v.in.byte_strides);
  const auto* in_base = static_cast<const std::byte*>(v.in.data);

  // Unless pack_in_pass, every block's filter once, up front, by all threads, and shared.
  const bool pack_in_pass = blocking.pack_in_pass && !prepacked;
  const Scratch<Acc> packing(pack_in_pass || prepacked ? 0 : checked_mul(g.groups * padded_M, K, kOp, ": the packed filter's element count"));
  if (!pack_in_pass && !prepacked) filter_blocks->pack_all(g, blocking, K, packing.get());
  const Acc* packed = prepacked ? prepacked : packing.get();

  const Dims out_strides = spatial(v.out.byte_strides);
  auto* out_base = static_cast<std::byte*>(v.out.data);
  const bool direct_out = std::is_same_v<T, Acc> && elements_of<Acc>(v.out);
  const TileActivation activation(desc);
  const std::vector<Acc> biases = group_biases<T, Acc>(v.bias, g, padded_M);  // block's at grp * padded_M + first
  const std::int64_t tasks = blocking.tasks, grain = blocking.grain, out_width = pad.out_width;
  parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    const Scratch<Acc> sums(band_max * max_width), staging(direct_out ? 0 : L * band_max);
    const Scratch<Acc> pass_filter(pack_in_pass ? channel_pass * taps * max_width : 0);
    const Scratch<Acc> pass_input(channel_pass * band_rows * pad.row_len);
    std::vector<const Acc*> planes(static_cast<std::size_t>(channel_pass));
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(band_max));
    for (std::int64_t task = begin; task < end; ++task) {
      const ChannelBlock& block = blocks[static_cast<std::size_t>(task % block_count)];
      const std::int64_t b = task / block_count % bands, grp = task / (block_count * bands) % g.groups;
      const std::int64_t n = task / (block_count * bands * g.groups);
      const std::int64_t width = block.vectors * L, used = std::min(width, M - block.first);
      const std::int64_t p0 = band_start(b), count = band_start(b + 1) - p0;
      // The padded rows [r0, r1) this band reads (all rows when the planes are made up front).
      const std::int64_t first_row = p0 / out_width, last_row = (p0 + count - 1) / out_width;
      const std::int64_t r0 = in_tasks ? first_row * g.strides[0] : 0;
      const std::int64_t r1 = in_tasks ? r0 + padded_rows(g, pad, first_row, last_row - first_row + 1) : 0;
      const std::int64_t oc = grp * M + block.first;
      const Acc* bias = v.bias ? biases.data() + grp * padded_M + block.first : nullptr;
      for (std::int64_t p = 0; p < count; ++p)  // where each output's window starts in the padded planes
        offsets[p] = (pad.row_base[(p0 + p) / out_width] - r0 * pad.row_len + (p0 + p) % out_width * pad.column_step) * step;
      for (std::int64_t c0 = 0; c0 < g.in_per_group; c0 += channel_pass) {
        const std::int64_t channels = std::min(channel_pass, g.in_per_group - c0);
        for (std::int64_t c = 0; c < channels; ++c) {
          const std::int64_t channel = grp * g.in_per_group + c0 + c;
          if (!in_tasks) {
            planes[c] = input->plane(n, channel);
            continue;
          }
          Acc* own = pass_input.get() + c * band_rows * pad.row_len;
          pad.fill<T, Acc>(g, in_base + n * v.in.byte_strides[0] + channel * v.in.byte_strides[1], v.in.byte_strides[1], 1,
                           in_strides, own, nullptr, r0, r1);
          planes[c] = own;
        }
        const Acc* filter = packed + (grp * padded_M + block.first) * K + c0 * taps * width;
        if (pack_in_pass) {  // this pass's filter; the next pass's rows are fetched meanwhile
          const std::int64_t depth = channels * taps, next = c0 * taps + depth;
          filter_blocks->pack(grp, block, c0 * taps, depth, pass_filter.get());
          filter_blocks->prefetch(grp, block, next, std::min(K - next, depth));
          filter = pass_filter.get();
        }
        // The last pass adds the bias and applies a relu as it stores the sums.
        const bool last = c0 + channels == g.in_per_group;
        const DirectSums how{c0 > 0, last ? bias : nullptr, last && activation.relu};
        direct_window_product(channels, taps, planes.data(), tap_offsets.data(), offsets.data(), count, block.vectors,
                              filter, how, sums.get());
      }
      if (activation.after) apply_activation(*activation.after, sums.get(), count * width);
      store_lanes<T, Acc>(sums.get(), width, count, used, out_base + n * v.out.byte_strides[0] + oc * v.out.byte_strides[1],
                          v.out.byte_strides[1], g, out_strides, p0, direct_out, staging.get());
    }
  });
}

// Layers of float sums. Preferred with at least a vector of output channels per group (fewer leave
// lanes of every FMA idle), and for pointwise layers only with enough input channels, or with
// one block of output channels on several threads. With fewer input channels a tile sums too
// few terms to pay for reading the input once per channel block, where the GEMM reads one packed
// panel for all output channels (1x1 64>256@56 is 5% slower direct on Zen 4, 15% on Zen 5;
// 256>64@56 12% faster on Zen 4). On several threads, output channels that fill one block (all
// its vectors: the input read once) and 64 input channels or more run direct, whose
// tasks split positions and channel blocks: paired, 1x1 64>64@56 (a ResNet-50 layer), 96>64@56
// and 128>64@56 took 0.57-0.75x the GEMM's time on 2 threads of Zen 5 and 0.77-0.90x on 2, 4 and
// 16 threads of the 16-core Xeon. Not the others measured: on 2 threads of the Xeon two blocks
// (64>128@56, 128>128@28) took 1.29-1.34x the time direct and 64>32@56 (a half block) 1.12x,
// and 32>64@56 1.02-1.05x on 2, 4 and 16 (on Zen 5 all of them 0.58-0.76x). On one thread the
// GEMM, which writes its sums straight into the output: the Xeon ran those three layers
// 0.95-1.09x the time direct, Zen 5 0.81-0.88x.
constexpr std::int64_t kDirectPointwiseMinChannels = 64;

Verdict applies(const Geometry& g, const Cpu& cpu) {
  if (g.direction != ConvolutionDirection::Forward) return {false, "a forward algorithm"};
  if (g.dtype == DataType::Float64) return {false, "float32 and float16 sums only"};
  const std::int64_t lanes = cpu.lanes(DataType::Float32);
  if (g.out_per_group < lanes)
    return {true, "fewer output channels per group (" + std::to_string(g.out_per_group) + ") than a vector holds (" +
                      std::to_string(lanes) + ")", false};
  const std::int64_t block_vectors = direct_vectors();  // Blocking's widest block
  if (g.kernel.product() == 1 && num_threads() > 1 && g.in_per_group >= kDirectPointwiseMinChannels &&
      ceil_div(g.out_per_group, lanes) == block_vectors)
    return {true, "a pointwise layer on several threads whose output channels per group (" +
                      std::to_string(g.out_per_group) + ") fill one block of " + std::to_string(block_vectors * lanes) +
                      ", with " + std::to_string(kDirectPointwiseMinChannels) + " input channels or more"};
  if (g.kernel.product() == 1 && g.in_per_group < kDirectPointwiseChannels)
    return {true, "a pointwise layer with fewer than " + std::to_string(kDirectPointwiseChannels) +
                      " input channels per group (the GEMM reads the input once for all output channels)", false};
  if (g.kernel.product() == 1 && g.in_per_group == kDirectPointwiseChannels && num_threads() <= kDirectFewThreads)
    return {true, "a pointwise layer with " + std::to_string(kDirectPointwiseChannels) + " input channels per group on " +
                      std::to_string(kDirectFewThreads) + " threads or fewer (the GEMM writes its sums in place)", false};
  return {true, g.kernel.product() > 1 ? "a window of several taps and a vector of output channels per group"
                                        : "a pointwise layer with many input channels and a vector of output channels"};
}

void describe(const Geometry& g, ConvolutionPlan& plan) {
  const Blocking b(g);
  // As run() decides for contiguous tensors.
  bool in_tasks = false;
  visit_float(g.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<typename AccumulatorOf<T>::type, float>) {
      Dims in_sizes{g.batch, g.in_channels}, filter_sizes{g.out_channels, g.in_per_group};
      for (int a = 0; a < g.D; ++a) in_sizes.push_back(g.in_spatial[a]), filter_sizes.push_back(g.kernel[a]);
      const TensorView in = unbound_view(TensorDesc{g.dtype, in_sizes, std::nullopt});
      const PaddedPlane pad(g, Taps(forward_walker(g), unbound_view(TensorDesc{g.dtype, filter_sizes, std::nullopt})), false);
      in_tasks = pads_in_tasks<T>(g, b, pad, in);
    }
  });
  plan.tiles = {{"lanes", b.L},
                {"vectors", b.most},
                {"channel_blocks", b.block_count},
                {"bands", b.bands},
                {"band", b.band_max},
                {"channel_pass", b.channel_pass},
                {"packed_per_pass", b.pack_in_pass ? 1 : 0},
                {"padded_per_pass", in_tasks ? 1 : 0}};
  plan.tasks = b.tasks;
}

void run(const ConvolutionDesc& desc, const Geometry& g, const Views& v) {
  visit_float(g.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<typename AccumulatorOf<T>::type, float>) {
      run_typed<T>(desc, g, v);
    } else {
      fail(kOp, ": the direct algorithm computes float32 and float16 only");  // applies() says so first
    }
  });
}

// Every block's filter, as run() packs it when it packs it up front.
void pack(const ConvolutionDesc& desc, const Geometry& g, const TensorView& filter, PackedFilter& packed) {
  visit_float(g.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<typename AccumulatorOf<T>::type, float>) {
      const BlockWalker walker = forward_walker(g);
      const Blocking b(g);
      const std::int64_t K = g.in_per_group * walker.tap_count();
      packed.f32.resize(static_cast<std::size_t>(checked_mul(g.groups * b.padded_M, K, kOp, ": the packed filter's element count")));
      FilterBlocks<T>(desc, g, walker, filter, b.L).pack_all(g, b, K, packed.f32.data());
    }
  });
}

}  // namespace

const Algorithm kDirect{"direct", applies, describe, run, pack};

}  // namespace dmlops::conv
