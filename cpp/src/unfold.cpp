#include "dmlops/ops/unfold.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dmlops/core/checked.hpp"
#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/rows.hpp"
#include "dmlops/core/strided.hpp"
#include "dmlops/core/window.hpp"

namespace dmlops {
namespace {

constexpr int kMaxSpatialRank = 6;
constexpr std::int64_t kBytesPerTask = 32 * 1024;       // below this, splitting costs more than it saves
// A fold whose input is larger than the last-level cache reads it from memory, in runs as short
// as a window's row (30 elements in a 3x3x3 fold of 32^3), with its sums in between; the
// hardware prefetcher did not keep up, and a prefetch this far ahead of each run does (Zen 4,
// paired, that fold 0.59x the time at 1 thread with 8 KiB, 0.63x with 4 KiB, 1.24x with 1 KiB).
// Inputs in cache are not prefetched: a 2-D fold of 7 MB took 1.14x the time so.
constexpr std::int64_t kFoldPrefetchBytes = 8192;
// A fold task's accumulator stays in L2 (a quarter of it: 256 KiB on Zen 4 and 5).
std::int64_t fold_scratch_bytes() { return platform::cache_sizes().l2 / 4; }

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

Dims spatial_sizes(const Dims& sizes) { return Dims(sizes.begin() + 2, sizes.end()); }

// The sliding window over `spatial`: one entry per spatial dimension in each of the five arrays
// (DirectML requires them all), every value in range, at least one block per dimension.
template <class Desc>
BlockWalker window_geometry(const char* op, const Dims& spatial, const Desc& desc) {
  const std::pair<const Dims*, const char*> arrays[] = {{&desc.window_sizes, "window_sizes"},
                                                        {&desc.strides, "strides"},
                                                        {&desc.dilations, "dilations"},
                                                        {&desc.start_padding, "start_padding"},
                                                        {&desc.end_padding, "end_padding"}};
  for (const auto& [values, field] : arrays) {
    if (values->size() != spatial.size())
      fail(op, ": ", field, " has ", values->size(), " entries but there are ", spatial.size(), " spatial dimensions");
  }
  return BlockWalker(window_axes(op, "window_sizes", spatial,
                                 WindowParams{desc.window_sizes, desc.strides, desc.dilations, desc.start_padding,
                                              desc.end_padding}));
}

void check_spatial_rank(const char* op, const char* what, int rank) {
  if (rank < 3 || rank > 2 + kMaxSpatialRank)
    fail(op, ": ", what, " has ", rank, " dimensions; it must have 3 to ", 2 + kMaxSpatialRank,
         ": (N, C, spatial...) with 1 to ", kMaxSpatialRank, " spatial dimensions");
}

// ---------------------------------------------------------------------------------------------
// Fold's arithmetic: the type each dtype sums in, loading columns as that type, storing sums.

template <class T>
struct Sum {
  using type = T;  // float32 and float64 sum in their own type
};
template <>
struct Sum<Half> {
  using type = float;
};
template <class T>
  requires std::is_integral_v<T>
struct Sum<T> {
  using type = std::make_unsigned_t<T>;  // wraps like numpy, without signed-overflow UB
};

// Columns [0, n) of an input row starting at `src` (byte step `step`) as Acc values: the row
// itself when it already is a contiguous, aligned array of Acc bits (float, double, integers
// read as their unsigned twin), else converted into `staging`.
template <class T, class Acc>
const Acc* load_columns(const std::byte* src, std::int64_t step, std::int64_t n, std::vector<Acc>& staging) {
  if constexpr (!std::is_same_v<T, Half>) {
    if (step == sizeof(T) && aligned(src, alignof(Acc))) return reinterpret_cast<const Acc*>(src);
  }
  if (staging.size() < static_cast<std::size_t>(n)) staging.resize(static_cast<std::size_t>(n));
  Acc* dst = staging.data();
  if constexpr (std::is_same_v<T, Half>) {
    if (step == sizeof(Half) && aligned(src, alignof(Half))) {
      half_to_float(reinterpret_cast<const Half*>(src), dst, static_cast<std::size_t>(n));
    } else {
      for (std::int64_t j = 0; j < n; ++j) dst[j] = half_bits_to_float(load<std::uint16_t>(src + j * step));
    }
  } else {
    for (std::int64_t j = 0; j < n; ++j) dst[j] = load<Acc>(src + j * step);
  }
  return dst;
}

template <class T, class Acc>
void store_row(std::byte* dst, std::int64_t step, const Acc* src, std::int64_t n) {
  if constexpr (std::is_same_v<T, Half>) {
    if (step == sizeof(Half) && aligned(dst, alignof(Half))) {
      float_to_half(src, reinterpret_cast<Half*>(dst), static_cast<std::size_t>(n));
      return;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const std::uint16_t bits = float_to_half_bits(src[j]);
      std::memcpy(dst + j * step, &bits, sizeof bits);
    }
  } else {
    static_assert(sizeof(T) == sizeof(Acc));
    if (step == sizeof(T)) {
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
      return;
    }
    for (std::int64_t j = 0; j < n; ++j) std::memcpy(dst + j * step, src + j, sizeof(T));
  }
}

// Writes `sums` (row-major over `sizes`) into the output region at `dst` with these byte strides.
template <class T, class Acc>
void store(const Acc* sums, std::byte* dst, const Dims& sizes, const Dims& byte_strides) {
  StridedLayout<1> layout(sizes, {byte_strides});
  layout.coalesce(0);  // no reordering: the flat order stays row-major, like `sums`
  const int r = layout.rank();
  const std::int64_t inner = r ? layout.size(r - 1) : 1;
  const std::int64_t inner_step = r ? layout.stride(0, r - 1) : 0;
  Dims outer;
  for (int d = 0; d + 1 < r; ++d) outer.push_back(layout.size(d));
  NdCounter counter(outer, 0);
  for (std::int64_t row = 0, rows = outer.product(); row < rows; ++row, counter.next(), sums += inner) {
    std::int64_t offset = 0;
    for (int d = 0; d + 1 < r; ++d) offset += counter[d] * layout.stride(0, d);
    store_row<T, Acc>(dst + offset, inner_step, sums, inner);
  }
}

// ---------------------------------------------------------------------------------------------
// Plans: how each operator cuts its work into tasks, for the run and for plan() alike.

// Unfold's tasks are (rows, range of b_0), a task's rows one output row (n, c, tap) or, with
// tap_triples, three (taps k to k + 2); rows are split only when there are too few to keep every
// thread busy, and never into pieces smaller than kBytesPerTask.
struct UnfoldTasks {
  std::int64_t rows, group, pieces, blocks0_per_piece, grain;  // rows: the tasks' units of `group` rows
};

UnfoldTasks unfold_tasks(const BlockWalker& walker, std::int64_t output_rows, std::size_t element_bytes, bool triples) {
  const std::int64_t group = triples ? 3 : 1, rows = output_rows / group;
  const auto elem = static_cast<std::int64_t>(element_bytes) * group;  // a block's bytes in a task's rows
  const std::int64_t blocks0 = walker.blocks()[0], row_bytes = walker.block_count() * elem;
  std::int64_t pieces = 1;
  if (rows < 4 * num_threads())
    pieces = std::clamp<std::int64_t>(ceil_div(4 * num_threads(), rows), 1,
                                      std::min(blocks0, std::max<std::int64_t>(1, row_bytes / kBytesPerTask)));
  const std::int64_t blocks0_per_piece = ceil_div(blocks0, pieces);
  pieces = ceil_div(blocks0, blocks0_per_piece);
  const std::int64_t grain = std::max<std::int64_t>(1, kBytesPerTask / (blocks0_per_piece * walker.block_stride(0) * elem));
  return {rows, group, pieces, blocks0_per_piece, grain};
}

bool unit_strides(const BlockWalker& walker) {
  for (int d = 0; d < walker.rank(); ++d) {
    if (walker.axis(d).stride != 1) return false;
  }
  return true;
}

// Whether unfold writes its output through StreamedRow: too large for the caches
// (stream_output, or stream_staged; 3x3 over 1x64x96x96, 24 MB in all, took 0.72-0.77x the time
// streamed on 1 thread of a Zen 4, 1.42-1.47x on 1 thread of a Zen 5 and 2.5x on 2: within
// stream_staged's three quarters of that cache it stays there), with contiguous rows of aligned
// elements.
bool unfold_streams(const TensorView& in, const TensorView& out) {
  const auto elem = static_cast<std::int64_t>(element_size(out.dtype));
  return out.byte_strides[2] == elem && aligned(out.data, static_cast<std::size_t>(elem)) &&
         (stream_output(out.element_count() * elem) || stream_staged(in.element_count() * elem, out.element_count() * elem));
}

// Whether unfold's streamed rows (not tap triples) go through AssembledRow: their runs are
// contiguous in the input, and the CPU has AVX-512BW (LineAssembler).
bool assembled_rows(const BlockWalker& walker, const TensorView& in, bool streamed, bool triples) {
  const int last = walker.rank() - 1;
  return streamed && !triples && LineAssembler::available() &&
         walker.axis(last).stride * in.byte_strides[2 + last] == static_cast<std::int64_t>(element_size(in.dtype));
}

KernelPlan describe(const UnfoldTasks& t, const BlockWalker& walker, bool streamed, bool assembled, bool one_copy_boxes,
                    bool triples) {
  const bool stride2 = walker.axis(walker.rank() - 1).stride == 2;
  const std::string reason =
      triples ? std::string("the three taps of each row of the window's last axis (n, c, taps k to k + 2) in one task: "
                            "their blocks that read input rows at once, two loads and two byte permutes per 64 output "
                            "bytes of each of the three output rows (avx512 vbmi), zeros around them") +
                    (streamed ? "; staged in L1 a few blocks of axis 0 at a time and streamed out (non-temporal "
                                "stores): the output is too large for the caches"
                              : "")
      : std::string(assembled ? "each output row (n, c, tap) walks its tap over the blocks, its lines put together in "
                                "registers from the input runs (avx512bw) and streamed out (non-temporal stores): the "
                                "output is too large for the caches"
                    : streamed ? "each output row (n, c, tap) walks its tap over the blocks into a buffer in L1, streamed out "
                               "(non-temporal stores) 8 KiB at a time: the output is too large for the caches"
                    : walker.rank() == 2
                        ? "each output row (n, c, tap) is its tap's box of blocks inside the input, copied at once, and zero fills around it"
                        : "each output row (n, c, tap) walks its tap over the blocks: input runs copied, padding zero-filled") +
            (one_copy_boxes ? "; output rows as wide as the input's: a box is one copy across its rows, the input elements "
                              "between them then zeroed"
             : unit_strides(walker) ? "; stride 1: a run is one copy"
             : stride2 && avx512_vbmi_enabled() ? "; stride-2 runs as one byte permute per 64 output bytes (avx512 vbmi)"
             : stride2 && avx2_enabled()
                 ? "; stride-2 runs longer than 32 bytes as one narrowing pack per 32 output bytes (avx2), shorter ones "
                   "element by element"
                 : "; strided runs element by element");
  KernelPlan k = KernelPlan::of("rows", reason, kernel_isa(KernelKind::Avx2), t.rows * t.pieces);
  k.tiles = {{"rows", t.rows}, {"pieces", t.pieces}, {"blocks0_per_piece", t.blocks0_per_piece}, {"grain", t.grain},
             {"streamed", streamed ? 1 : 0}, {"assembled", assembled ? 1 : 0}, {"tap_triples", triples ? 1 : 0}};
  return k;
}

// Whether a 2-D unfold's boxes are each one copy (execute's planar rows): stride 1 along both
// axes, from input rows back to back into packed output rows as long as they are ("same"
// padding, such as a 3x3 window padded by 1). A box's rows then have one pitch on both sides,
// so a copy from its first element to its last fills it, and only the input elements that land
// between its rows (outside the tap's columns) need zeroing afterwards: one long copy instead of
// a short copy and fills per row. 1x64x56x56 3x3 padded by 1, Zen 4, 1 thread, alternating
// processes: 0.68x the time; 1x256x14x14 0.50x; 5x5 padded by 2 0.60x; float16 0.85x.
bool one_copy_boxes(const BlockWalker& walker, const TensorView& in, const TensorView& out, bool streamed) {
  if (walker.rank() != 2 || streamed) return false;
  const std::int64_t element = element_size(in.dtype);
  return out.byte_strides[2] == element && walker.axis(1).stride * in.byte_strides[3] == element &&
         walker.axis(0).stride * in.byte_strides[2] == walker.blocks()[1] * element;
}

// Streamed tap triples (execute) stage their rows in L1, kTripleStageBytes each, in whole blocks
// of axis 0: a block larger than kTripleStageMaxBytes leaves them to StreamedRow.
constexpr std::int64_t kTripleStageBytes = 8192, kTripleStageMaxBytes = 16384;
// The blocks of axis 0 staged at a time.
std::int64_t triple_stage_span(const BlockWalker& walker, std::int64_t element) {
  return std::max<std::int64_t>(1, kTripleStageBytes / (walker.block_stride(0) * element));
}

// Whether an unfold writes the three taps of each row of its window's last axis in one pass
// (triple_blocks, tap_triple_rows with the byte permute): a window 3 wide along the last axis,
// stride 2, undilated and padded by one element at the start of each row (ResNet's stride-2
// 3x3, and 3x3x3 windows with strides (1, 2, 2)), over contiguous input rows into packed output
// rows of 64 bytes or more. A row at a time, each row loads its input again: paired (old and
// new builds alternating), Zen 4, 3x3 stride 2 padded by 1, of 1x64x112x112 took 0.79x the time
// at 1 thread and 0.91x at 2 in float16, 0.69x and 0.76x in float32; of 1x32x224x224 uint8 0.68x
// and 0.77x. Outputs too large for the caches stream their staged rows as StreamedRow does:
// float16 3x3x3 (1, 2, 2) of 1x16x32x64x64 (28 MB out) 0.63x and 0.75x at 1 and 2 threads (with
// ordinary stores instead, 0.69x and 0.90x; of 1x32x32x128x128, 226 MB, 0.89x and 1.08x: the
// stores read each line first), 3x3 of 1x256x224x224 (58 MB) 0.80x and 0.82x. Only where AVX-512
// runs in halves (Zen 4, where they were measured): on the 16-core Xeon the float16 3x3 stride-2
// unfold of 1x64x112x112 ran at 112% of a copy of its bytes on 1 thread and 85-95% on 16 a row
// at a time (two runs, 2026-12-04 and 05), and at 82% and 48-68% with tap triples (three runs a
// day later, 61-69% at 4 and 8 threads: slower by 1.3-1.6x).
bool tap_triples(const BlockWalker& walker, const TensorView& in, const TensorView& out, bool streamed) {
#if DMLOPS_X86
  const std::size_t element = element_size(in.dtype);
  const auto step = static_cast<std::int64_t>(element);
  if (walker.rank() < 2 || (streamed && walker.block_stride(0) * step > kTripleStageMaxBytes)) return false;
  const int last = walker.rank() - 1;
  const WindowAxis& columns = walker.axis(last);
  return platform::cpu_features().avx512_half_rate && columns.window == 3 && columns.stride == 2 &&
         columns.dilation == 1 && columns.start == 1 && in.byte_strides[2 + last] == step &&
         out.byte_strides[2] == step && tap_triple_rows_vbmi_take(walker.blocks()[last], element);
#else
  static_cast<void>(walker), static_cast<void>(in), static_cast<void>(out), static_cast<void>(streamed);
  return false;  // (without the byte permute, a row at a time)
#endif
}

// Fold's tasks are slabs of output planes (n, c, rows [r0, r1) of the first spatial axis): the
// accumulator stays in L2, and planes are split only when there are too few for every thread.
struct FoldTasks {
  std::int64_t planes, slab_rows, slabs, tasks, grain;
};

FoldTasks fold_tasks(const TensorView& in, const TensorView& out, std::size_t acc_bytes) {
  const std::int64_t planes = out.sizes[0] * out.sizes[1];
  const Dims spatial = spatial_sizes(out.sizes);
  const std::int64_t rows0 = spatial[0], per_row0 = spatial.product() / rows0;
  const std::int64_t cap = std::max<std::int64_t>(1, fold_scratch_bytes() / (per_row0 * static_cast<std::int64_t>(acc_bytes)));
  const std::int64_t wanted_slabs = ceil_div(4 * num_threads(), planes);
  const std::int64_t slab_rows = std::min({rows0, cap, ceil_div(rows0, wanted_slabs)});
  const std::int64_t slabs = ceil_div(rows0, slab_rows), tasks = planes * slabs;
  const std::int64_t bytes_per_task = in.element_count() / tasks * static_cast<std::int64_t>(element_size(in.dtype)) + 1;
  return {planes, slab_rows, slabs, tasks, std::max<std::int64_t>(1, kBytesPerTask / bytes_per_task)};
}

// in_place: the slabs are the output's own (fold_in_place).
KernelPlan describe(const FoldTasks& t, bool in_place, bool prefetched) {
  KernelPlan k = KernelPlan::of(
      "slabs",
      std::string("each task sums every tap into a slab of one output plane, taps in increasing order, ") +
          (in_place ? "in the output itself (packed planes, unit step along the last axis)"
                    : "in an accumulator, then stores it (float16, a strided output or a step of 2 or more)") +
          (prefetched ? "; the columns, larger than the last-level cache, prefetched 8 KiB ahead" : ""),
      kernel_isa(KernelKind::Avx2), t.tasks);
  k.tiles = {{"planes", t.planes}, {"slabs", t.slabs}, {"slab_rows", t.slab_rows}, {"in_place", in_place ? 1 : 0},
             {"prefetched", prefetched ? 1 : 0}, {"grain", t.grain}};
  return k;
}

// Whether fold prefetches its columns ahead of each run (kFoldPrefetchBytes): they are larger
// than the last-level cache and load_columns reads them where they are (contiguous aligned
// elements; float16 is converted into a staging row first).
template <class T>
bool fold_prefetches(const TensorView& in) {
  const auto elem = static_cast<std::int64_t>(sizeof(T));
  return !std::is_same_v<T, Half> && elements_of<T>(in) && in.byte_strides[2] == elem &&
         in.element_count() * elem > platform::cache_sizes().l3;
}

// The type fold sums dtype in, as bytes.
std::size_t fold_acc_bytes(DataType dtype) {
  return visit_dtype(dtype, [](auto tag) { return sizeof(typename Sum<typename decltype(tag)::type>::type); });
}

// "Unfold 1x3x8x8 f32 window 3x3".
std::string call_text(const char* op, const TensorView& in, const Dims& window) {
  return std::string(op) + " " + dims_text(in.sizes) + " " + std::string(short_name(in.dtype)) + " window " +
         dims_text(window);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Validation

TensorDesc infer_output(const UnfoldDesc& desc) {
  constexpr const char* op = "Unfold";
  validate_tensor_desc(desc.input, "Unfold: input");
  check_spatial_rank(op, "input", desc.input.sizes.size());
  const BlockWalker walker = window_geometry(op, spatial_sizes(desc.input.sizes), desc);
  const std::int64_t batch = desc.input.sizes[0];
  const std::int64_t rows = checked_mul(desc.input.sizes[1], walker.tap_count(), op, ": the output's row count");
  checked_mul(checked_mul(batch, rows, op, ": the output's element count"), walker.block_count(), op,
              ": the output's element count");
  const TensorDesc expected{desc.input.dtype, {batch, rows, walker.block_count()}, std::nullopt};
  return checked_output(expected, desc.output, "Unfold: output", " but the input unfolds to ",
                        ": (N, C * prod(window_sizes), block count)");
}

TensorDesc infer_output(const FoldDesc& desc) {
  constexpr const char* op = "Fold";
  validate_tensor_desc(desc.input, "Fold: input");
  if (desc.input.sizes.size() != 3)
    fail("Fold: input has ", desc.input.sizes.size(),
         " dimensions; it must have 3: (N, C * prod(window_sizes), block count)");
  validate_tensor_desc(desc.output, "Fold: output");
  check_spatial_rank(op, "output", desc.output.sizes.size());
  if (desc.output.dtype != desc.input.dtype)
    fail<DTypeError>("Fold: output has dtype ", name(desc.output.dtype), " but the input is ", name(desc.input.dtype));
  const BlockWalker walker = window_geometry(op, spatial_sizes(desc.output.sizes), desc);
  const std::int64_t rows = desc.input.sizes[1], taps = walker.tap_count();
  if (rows % taps != 0)
    fail("Fold: input sizes[1] is ", rows, ", which is not divisible by prod(window_sizes) = ", taps);
  if (desc.input.sizes[2] != walker.block_count())
    fail("Fold: input sizes[2] is ", desc.input.sizes[2], " but the window slides to ", walker.block_count(),
         " blocks: ", walker.blocks(), " per spatial dimension");
  if (desc.output.sizes[0] != desc.input.sizes[0])
    fail("Fold: output sizes[0] (batch) is ", desc.output.sizes[0], " but the input's is ", desc.input.sizes[0]);
  if (desc.output.sizes[1] != rows / taps)
    fail("Fold: output sizes[1] (channels) is ", desc.output.sizes[1], " but input sizes[1] / prod(window_sizes) = ",
         rows, " / ", taps, " = ", rows / taps);
  return desc.output;
}

// ---------------------------------------------------------------------------------------------
// Unfold: each output row (n, c, k) is the walk of tap k over the blocks, copying the runs that
// read inside plane (n, c) and zero-filling the runs that read padding. With stride 1 a run is
// one memcpy of the in-bounds part of an input row.

namespace {

// An output row written through a buffer in L1 and streamed out a chunk at a time
// (stream_bytes), for outputs too large for the caches (unfold_streams) with contiguous
// rows: their runs (30 elements in a 3x3x3 unfold) are too short to stream one by one, and
// ordinary stores read each line of the output before writing it. Runs and fills arrive in
// column order, back to back, as BlockWalker::walk hands them out, a tap's rows along the last
// two axes in one call (copy_rows): a call per run, and even a check per run that gathered the
// runs into blocks, took a fifth to a half of a 3x3x3 unfold's time. Zen 3, 1 thread, alternating
// processes: 1x16x32x32x32 0.80-0.84x the time so, 0.60x padded by 1; float16 with strides
// (1, 2, 2) over 1x16x32x64x64, its rows through the stride-2 kernel: 0.3-0.5x.
template <class T>
class StreamedRow {
 public:
  static constexpr std::int64_t kChunk = 8192 / sizeof(T);  // elements: the buffer stays in L1
  static constexpr auto kSize = static_cast<std::int64_t>(sizeof(T));

  StreamedRow(std::byte* dst, T* buffer) : dst_(dst), buffer_(buffer) {
    // The first chunk ends at a cache line of the output, so that every later one starts at one.
    limit_ = kChunk - static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(dst) % 64) / kSize;
  }
  void copy(const std::byte* src, std::int64_t step, std::int64_t count) {
    append(count, [&](T* to, std::int64_t take) {
      copy_row<T>(reinterpret_cast<std::byte*>(to), kSize, src, step, take);
      src += take * step;
    });
  }
  // `rows` runs of `count` elements, the input of each row_step bytes after the last's, with
  // `gap` zeros between two runs: the rows that fit the chunk at once as one copy_rows call (one
  // copy_byte_rows or stride-2 narrowing call) and one fill_rows call.
  DMLOPS_NOINLINE void copy_rows(const std::byte* src, std::int64_t step, std::int64_t count, std::int64_t row_step,
                                 std::int64_t rows, std::int64_t gap) {
    const std::int64_t pitch = count + gap;
    while (rows > 0) {
      // Rows each with the gap after it; the last row's gap only if the next run needs it.
      const std::int64_t fit = std::min(rows - 1, (limit_ - used_) / pitch);
      if (fit <= 1) {  // a run across the chunk's end, or the last one
        copy(src, step, count);
        if (rows > 1) fill(gap);
        src += row_step, --rows;
        continue;
      }
      T* to = buffer_ + used_;
      dmlops::copy_rows<T>(reinterpret_cast<std::byte*>(to), pitch * kSize, kSize, src, row_step, step, count, fit);
      if (gap > 0) fill_rows<T>(reinterpret_cast<std::byte*>(to + count), pitch * kSize, T{0}, gap, fit);
      used_ += fit * pitch, src += fit * row_step, rows -= fit;
      if (used_ == limit_) stream_chunk();
    }
  }
  void fill(std::int64_t count) {
    append(count, [](T* to, std::int64_t take) { std::fill_n(to, take, T{0}); });
  }
  // The rest of the row, out.
  void finish() { stream_chunk(); }

 private:
  void stream_chunk() {
    stream_bytes(dst_, reinterpret_cast<const std::byte*>(buffer_), static_cast<std::size_t>(used_ * kSize));
    dst_ += used_ * kSize;
    used_ = 0, limit_ = kChunk;
  }
  // `count` elements, written by write(to, take) a chunk's worth at a time.
  template <class Write>
  void append(std::int64_t count, Write&& write) {
    while (count > 0) {
      const std::int64_t take = std::min(count, limit_ - used_);
      write(buffer_ + used_, take);
      used_ += take, count -= take;
      if (used_ == limit_) stream_chunk();
    }
  }

  std::byte* dst_;
  T* buffer_;
  std::int64_t used_ = 0, limit_ = kChunk;
};

// An output row streamed by a LineAssembler, where its runs are contiguous in the input (stride
// 1 along the last axis): its lines are put together in registers rather than staged in L1.
// Zen 4, paired builds, 1 thread: 3x3x3 over 1x16x32x32x32 float32 (47 MB) 0.55x the time of
// StreamedRow, float16 0.52x, 2 threads 0.86-0.89x; the 16-core Xeon, one build alternating
// with a switch, 1 to 16 threads: streamed 3x3x3 float32 padded by one (57 MB), float16 (55 MB)
// and a uint8 3x3 (75 MB) 0.71-0.85x the time at 1 to 4 threads, 0.78-0.96x at 8 and 16. The
// same calls as StreamedRow's; the runs' element steps are the element size.
template <class T>
class AssembledRow {
 public:
  explicit AssembledRow(std::byte* dst) : lines_(dst) {}
  void copy(const std::byte* src, std::int64_t /*step*/, std::int64_t count) { lines_.copy(src, bytes(count)); }
  void copy_rows(const std::byte* src, std::int64_t /*step*/, std::int64_t count, std::int64_t row_step,
                 std::int64_t rows, std::int64_t gap) {
    lines_.copy_rows(src, row_step, bytes(count), rows, bytes(gap));
  }
  void fill(std::int64_t count) { lines_.zeros(bytes(count)); }
  void finish() { lines_.finish(); }

 private:
  static std::size_t bytes(std::int64_t count) { return static_cast<std::size_t>(count) * sizeof(T); }
  LineAssembler lines_;
};

// The output rows of taps k to k + 2 (tap_triples) for blocks [first, last) of axis d: dst[j]
// is tap k + j's output at block `first` of axis d (of the blocks before d), src the input at
// index 0 of axis d. Blocks that read padding along d are zeros; along the axis before the
// last, the rows that read input rows go to tap_triple_rows at once.
template <class T>
void triple_blocks(const BlockWalker& walker, const Dims& tap, int d, std::int64_t first, std::int64_t last,
                   const Dims& position_strides, const std::byte* src, std::byte* const* dst) {
  constexpr auto size = static_cast<std::int64_t>(sizeof(T));
  const WindowAxis& axis = walker.axis(d);
  const std::int64_t per_block = walker.block_stride(d), block_bytes = per_block * size;
  const auto [valid0, valid1] = axis.valid_outputs(tap[d]);
  const std::int64_t b0 = std::clamp(valid0, first, last), b1 = std::clamp(valid1, b0, last);
  for (int j = 0; j < 3; ++j) {
    if (first < b0) fill_row<T>(dst[j], size, T{0}, (b0 - first) * per_block);
    if (b1 < last) fill_row<T>(dst[j] + (b1 - first) * block_bytes, size, T{0}, (last - b1) * per_block);
  }
  if (b0 == b1) return;
  const std::byte* from = src + axis.input_index(b0, tap[d]) * position_strides[d];
  const std::int64_t from_step = axis.stride * position_strides[d], at = (b0 - first) * block_bytes;
  if (d == walker.rank() - 2) {
    std::byte* const rows[3] = {dst[0] + at, dst[1] + at, dst[2] + at};
    return tap_triple_rows<T>(rows, block_bytes, from, from_step, walker.axis(d + 1).in, per_block, b1 - b0);
  }
  for (std::int64_t b = b0; b < b1; ++b, from += from_step) {
    const std::int64_t inner_at = (b - first) * block_bytes;
    std::byte* const inner[3] = {dst[0] + inner_at, dst[1] + inner_at, dst[2] + inner_at};
    triple_blocks<T>(walker, tap, d + 1, 0, walker.blocks()[d + 1], position_strides, from, inner);
  }
}

// A 2-D unfold's taps: per axis, each tap's outputs that read inside the input, made once per
// call for the rows of every channel, not per row (WindowAxis::valid_outputs divides). With the
// tasks' rows counted (execute), paired, 1 thread: a float16 stride-2 3x3 unfold of
// 1x64x112x112 took 0.91x the time on Zen 5 and 0.97x on the 16-core Xeon (0.94x at 16
// threads), 3x3 of 1x256x14x14 0.67x and 0.57x.
// Windows of over kMaxTable taps along an axis (hostile sizes: the table would outgrow the
// output) compute them per row instead.
class PlanarTaps {
 public:
  static constexpr std::int64_t kMaxTable = 1024;
  PlanarTaps(const BlockWalker& walker, bool planar) : walker_(walker) {
    if (!planar) return;
    for (int d = 0; d < 2; ++d) {
      const WindowAxis& axis = walker.axis(d);
      if (axis.window > kMaxTable) continue;
      valid_[d].resize(static_cast<std::size_t>(axis.window));
      for (std::int64_t t = 0; t < axis.window; ++t) valid_[d][static_cast<std::size_t>(t)] = axis.valid_outputs(t);
    }
  }
  std::pair<std::int64_t, std::int64_t> valid_outputs(int axis, std::int64_t t) const {
    const auto& table = valid_[axis];
    return table.empty() ? walker_.axis(axis).valid_outputs(t) : table[static_cast<std::size_t>(t)];
  }

 private:
  const BlockWalker& walker_;
  std::vector<std::pair<std::int64_t, std::int64_t>> valid_[2];
};

}  // namespace

void execute(const UnfoldDesc& desc, const TensorView& in, const TensorView& out) {
  const TensorDesc out_desc = infer_output(desc);
  check_view_matches(in, desc.input, "Unfold: input");
  check_output_view(out, out_desc, "Unfold: out", {&in});
  const BlockWalker walker = window_geometry("Unfold", spatial_sizes(in.sizes), desc);

  const Dims position_strides = spatial_sizes(in.byte_strides);
  const std::int64_t taps = walker.tap_count();
  const bool streamed = unfold_streams(in, out);
  const bool one_copy = one_copy_boxes(walker, in, out, streamed);
  // A task's rows: one (n, c, tap), or three (tap_triples: taps k to k + 2, one row of the window).
  const bool triples = tap_triples(walker, in, out, streamed);
  const UnfoldTasks t = unfold_tasks(walker, in.sizes[0] * in.sizes[1] * taps, element_size(in.dtype), triples);
  const std::int64_t group = t.group, units_per_batch = in.sizes[1] * taps / group;
  const bool assembled = assembled_rows(walker, in, streamed, triples);
  if (verbose())
    log_plan(call_text("Unfold", in, desc.window_sizes), describe(t, walker, streamed, assembled, one_copy, triples));
  const std::int64_t rows = t.rows, pieces = t.pieces, blocks0 = walker.blocks()[0],
                     blocks0_per_piece = t.blocks0_per_piece, grain = t.grain;

  const auto* src_base = static_cast<const std::byte*>(in.data);
  auto* dst_base = static_cast<std::byte*>(out.data);
  const std::int64_t col_step = out.byte_strides[2];
  visit_width(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Rows that read every other input element (stride 2 along the last axis) into unit-stride
    // output rows: a planar box's rows go to zeros_then_even_rows together (the walk's rows
    // form reaches the same narrowing kernel through copy_rows).
    const int last = walker.rank() - 1;
    const bool stride2_rows = walker.axis(last).stride * position_strides[last] == 2 * std::int64_t{sizeof(T)} &&
                              col_step == std::int64_t{sizeof(T)};
    // Two spatial axes: a tap's blocks that read inside the input are a box (valid_outputs on
    // each axis), so its row is fills around one 2-D copy, without the walk's calls per run
    // (2-core Xeon, paired, 7 rounds: a float16 stride-2 3x3 unfold 0.70x the time at 1 thread in
    // L2, 0.84x at 2 threads, 0.84-0.87x for 1x64x112x112; 16-core Xeon, 16 threads: 0.90x;
    // stride 1 within noise on both).
    const bool planar = walker.rank() == 2 && !streamed && !triples;
    const std::int64_t width = walker.blocks()[planar ? 1 : 0];
    const PlanarTaps planar_taps(walker, planar);
    // Tap triples: a block of axis 0 in a row's bytes, and the blocks staged at a time (streamed).
    const std::int64_t block0_bytes = walker.block_stride(0) * std::int64_t{sizeof(T)};
    const std::int64_t span = triple_stage_span(walker, sizeof(T)), staged = span * block0_bytes;
    parallel_for(0, rows * pieces, grain, [&](std::int64_t begin, std::int64_t end) {
      std::vector<T> buffer(!streamed || assembled ? 0
                            : triples              ? 3 * span * walker.block_stride(0)
                                                   : StreamedRow<T>::kChunk);
      // The task's rows (n, c, taps k to k + group - 1) and piece, divided out once and then
      // counted (see PlanarTaps).
      std::int64_t piece = begin % pieces, n = begin / pieces / units_per_batch;
      std::int64_t unit = begin / pieces % units_per_batch, c = unit * group / taps, k = unit * group % taps;
      for (std::int64_t task = begin; task < end; ++task, ++piece) {
        if (piece == pieces) {
          piece = 0, ++unit, k += group;
          if (k == taps) k = 0, ++c;
          if (unit == units_per_batch) unit = 0, c = 0, ++n;
        }
        std::byte* dst = dst_base + n * out.byte_strides[0] + (c * taps + k) * out.byte_strides[1];
        const std::byte* src = src_base + n * in.byte_strides[0] + c * in.byte_strides[1];
        const std::int64_t first0 = piece * blocks0_per_piece, last0 = std::min(blocks0, first0 + blocks0_per_piece);
        const auto fill = [&](std::int64_t col, std::int64_t count) {
          fill_row<T>(dst + col * col_step, col_step, T{0}, count);
        };
        if (triples) {  // taps k to k + 2 at once
          const Dims tap = walker.tap(k);
          std::byte* const rows[3] = {dst + first0 * block0_bytes, dst + out.byte_strides[1] + first0 * block0_bytes,
                                      dst + 2 * out.byte_strides[1] + first0 * block0_bytes};
          if (!streamed) {
            triple_blocks<T>(walker, tap, 0, first0, last0, position_strides, src, rows);
            continue;
          }
          // Streamed: staged in L1 (kTripleStageBytes per row), whole blocks of axis 0 at a time,
          // each row's pieces streamed whole lines only (a line across two pieces waits for the
          // next piece; stream_bytes would store its two parts apart, one part normally).
          auto* const staging = reinterpret_cast<std::byte*>(buffer.data());
          std::byte* const stage[3] = {staging, staging + staged, staging + 2 * staged};
          LineStreamer streamers[3];
          for (std::int64_t a = first0; a < last0; a += span) {
            const std::int64_t b = std::min(last0, a + span), at = (a - first0) * block0_bytes;
            triple_blocks<T>(walker, tap, 0, a, b, position_strides, src, stage);
            for (int j = 0; j < 3; ++j)
              streamers[j].write(rows[j] + at, stage[j], static_cast<std::size_t>((b - a) * block0_bytes));
          }
        } else if (streamed) {
          const auto walk_into = [&](auto& row) {
            walker.walk(walker.tap(k), first0, last0, position_strides, /*base_offset=*/0,
                        [&](std::int64_t, std::int64_t count) { row.fill(count); },
                        Overloaded{[&](std::int64_t, std::int64_t offset, std::int64_t step, std::int64_t count) {
                                     row.copy(src + offset, step, count);
                                   },
                                   [&](std::int64_t, std::int64_t offset, std::int64_t step, std::int64_t count,
                                       std::int64_t row_step, std::int64_t rows, std::int64_t pitch) {
                                     row.copy_rows(src + offset, step, count, row_step, rows, pitch - count);
                                   }});
            row.finish();
          };
          std::byte* const row_dst = dst + first0 * walker.block_stride(0) * col_step;
          if (assembled) {
            AssembledRow<T> row(row_dst);
            walk_into(row);
          } else {
            StreamedRow<T> row(row_dst, buffer.data());
            walk_into(row);
          }
        } else if (planar) {
          const Dims tap = walker.tap(k);
          const WindowAxis &rows_axis = walker.axis(0), &columns_axis = walker.axis(1);
          const auto [valid0, valid1] = planar_taps.valid_outputs(0, tap[0]);
          const std::int64_t r0 = std::clamp(valid0, first0, last0), r1 = std::clamp(valid1, r0, last0);
          const auto [c0, c1] = planar_taps.valid_outputs(1, tap[1]);
          if (r0 == r1 || c0 == c1) {
            fill(first0 * width, (last0 - first0) * width);
            continue;
          }
          if (first0 < r0) fill(first0 * width, (r0 - first0) * width);
          const std::int64_t i0 = rows_axis.input_index(r0, tap[0]), i1 = columns_axis.input_index(c0, tap[1]);
          const std::int64_t src_row_step = rows_axis.stride * position_strides[0];
          const std::int64_t src_step = columns_axis.stride * position_strides[1], n = c1 - c0;
          std::byte* first = dst + (r0 * width + c0) * col_step;
          const std::byte* from = src + i0 * position_strides[0] + i1 * position_strides[1];
          if (n == width && src_row_step == n * src_step) {  // whole rows, back to back on both sides: one run
            copy_row<T>(first, col_step, from, src_step, n * (r1 - r0));
          } else if (one_copy) {  // from its first element to its last, then zeros between its rows
            copy_row<T>(first, col_step, from, src_step, (r1 - r0 - 1) * width + n);
            if (c0 > 0) fill(r0 * width, c0);
            fill_rows<T>(dst + (r0 * width + c1) * col_step, width * col_step, T{0}, width - n, r1 - r0 - 1);
            if (c1 < width) fill((r1 - 1) * width + c1, width - c1);
          } else if (stride2_rows) {  // the rows together, each with its leading zeros (zeros_then_even_rows)
            if (c1 < width) fill_rows<T>(dst + (r0 * width + c1) * col_step, width * col_step, T{0}, width - c1, r1 - r0);
            zeros_then_even_rows<T>(first - c0 * col_step, width * col_step, c0, from, src_row_step, n, r1 - r0);
          } else {  // row by row, in memory order (the fills first made a 1x64x56x56 unfold 5% slower)
            for (std::int64_t b = r0; b < r1; ++b, first += width * col_step, from += src_row_step) {
              if (c0 > 0) fill(b * width, c0);
              copy_row<T>(first, col_step, from, src_step, n);
              if (c1 < width) fill(b * width + c1, width - c1);
            }
          }
          if (r1 < last0) fill(r1 * width, (last0 - r1) * width);
        } else {
          walker.walk(walker.tap(k), first0, last0, position_strides, /*base_offset=*/0, fill,
                      Overloaded{[&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count) {
                                   copy_row<T>(dst + col * col_step, col_step, src + offset, step, count);
                                 },
                                 [&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count,
                                     std::int64_t row_step, std::int64_t rows, std::int64_t pitch) {
                                   copy_rows<T>(dst + col * col_step, pitch * col_step, col_step, src + offset, row_step,
                                                step, count, rows);
                                   const std::int64_t gap = pitch - count;
                                   if (gap == 0) return;
                                   if (col_step == std::int64_t{sizeof(T)})
                                     fill_rows<T>(dst + (col + count) * col_step, pitch * col_step, T{0}, gap, rows - 1);
                                   else
                                     for (std::int64_t r = 0; r + 1 < rows; ++r) fill(col + r * pitch + count, gap);
                                 }});
        }
      }
      if (streamed) stream_fence();
    });
  });
}

// As execute() decides for a packed output.
KernelPlan plan(const UnfoldDesc& desc) {
  const TensorView in = unbound_view(desc.input), out = unbound_view(infer_output(desc));
  const BlockWalker walker = window_geometry("Unfold", spatial_sizes(in.sizes), desc);
  const bool streamed = unfold_streams(in, out), triples = tap_triples(walker, in, out, streamed);
  return describe(unfold_tasks(walker, in.sizes[0] * in.sizes[1] * walker.tap_count(), element_size(in.dtype), triples),
                  walker, streamed, assembled_rows(walker, in, streamed, triples), one_copy_boxes(walker, in, out, streamed),
                  triples);
}

// ---------------------------------------------------------------------------------------------
// Fold: tasks are slabs of output planes (n, c, rows [r0, r1) of the first spatial axis), so
// no two threads write the same element and no atomics are needed. A task zeroes a contiguous
// accumulator for its slab, adds the runs of every tap k in increasing k (the same order for
// every thread count, hence deterministic sums), then stores the slab once (rounding float16).
// Where the output's slab has the accumulator's layout (fold_in_place), it is the accumulator,
// and there is nothing to store.

// Whether fold accumulates straight into the output: Acc is T's own bits (every dtype but
// float16), the output's planes are contiguous Acc (planes_contiguous), and the window steps by one
// along the last axis (add_row's stride-2 loop writes back one entry past its last target,
// which in the output may belong to another task's slab). The staging and the copy out were a
// twentieth of a 2-D fold's time at 1 thread on Zen 4.
template <class T, class Acc>
bool fold_in_place(const BlockWalker& walker, const TensorView& out) {
  if constexpr (std::is_same_v<T, Half> || sizeof(T) != sizeof(Acc)) {
    return false;
  } else {
    return walker.axis(walker.rank() - 1).stride == 1 && planes_contiguous<Acc>(out);
  }
}

void execute(const FoldDesc& desc, const TensorView& in, const TensorView& out) {
  const TensorDesc out_desc = infer_output(desc);
  check_view_matches(in, desc.input, "Fold: input");
  check_output_view(out, out_desc, "Fold: out", {&in});
  const BlockWalker walker = window_geometry("Fold", spatial_sizes(out.sizes), desc);

  const std::int64_t taps = walker.tap_count(), channels = out.sizes[1];
  const Dims slab_sizes_full = spatial_sizes(out.sizes);
  const std::int64_t rows0 = slab_sizes_full[0], per_row0 = slab_sizes_full.product() / rows0;
  const std::int64_t per_block0 = walker.block_stride(0);
  const auto* src_base = static_cast<const std::byte*>(in.data);
  auto* dst_base = static_cast<std::byte*>(out.data);
  const FoldTasks t = fold_tasks(in, out, fold_acc_bytes(in.dtype));

  visit_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = typename Sum<T>::type;
    const std::int64_t slab_rows = t.slab_rows, slabs = t.slabs, tasks = t.tasks, grain = t.grain;
    const bool in_place = fold_in_place<T, Acc>(walker, out);
    const bool prefetch = fold_prefetches<T>(in);
    if (verbose()) log_plan(call_text("Fold", in, desc.window_sizes), describe(t, in_place, prefetch));

    Dims slab_sizes = slab_sizes_full;
    slab_sizes[0] = slab_rows;
    const Dims sum_strides = packed_strides(slab_sizes);  // positions in the accumulator
    const Dims out_strides = spatial_sizes(out.byte_strides);

    parallel_for(0, tasks, grain, [&](std::int64_t begin, std::int64_t end) {
      std::vector<Acc> scratch(in_place ? 0 : static_cast<std::size_t>(slab_rows * per_row0 + 1));  // + 1: add_row's slack
      std::vector<Acc> staging;
      for (std::int64_t task = begin; task < end; ++task) {
        const std::int64_t plane = task / slabs, r0 = task % slabs * slab_rows;
        const std::int64_t r1 = std::min(rows0, r0 + slab_rows);
        const std::int64_t n = plane / channels, c = plane % channels;
        std::byte* slab = dst_base + n * out.byte_strides[0] + c * out.byte_strides[1] + r0 * out_strides[0];
        Acc* sums = in_place ? reinterpret_cast<Acc*>(slab) : scratch.data();
        std::fill_n(sums, (r1 - r0) * per_row0, Acc{0});
        for (std::int64_t k = 0; k < taps; ++k) {
          const Dims tap = walker.tap(k);
          // Only blocks whose tap lands in rows [r0, r1) add to this slab.
          const auto [b_first, b_last] = walker.axis(0).outputs_reading(tap[0], r0, r1);
          if (b_first == b_last) continue;
          const std::int64_t col_first = b_first * per_block0;
          const Acc* columns = load_columns<T, Acc>(
              src_base + n * in.byte_strides[0] + (c * taps + k) * in.byte_strides[1] + col_first * in.byte_strides[2],
              in.byte_strides[2], (b_last - b_first) * per_block0, staging);
          const auto nothing = [](std::int64_t, std::int64_t) {};  // padding receives nothing
          // Two walks, not a test per run: with the test inside, folds in cache took 1.07x the time.
          if (prefetch) {  // columns is the input itself (fold_prefetches)
            walker.walk(tap, b_first, b_last, sum_strides, /*base_offset=*/-r0 * sum_strides[0], nothing,
                        [&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count) {
                          const auto* from = reinterpret_cast<const std::byte*>(columns + (col - col_first));
                          for (std::int64_t b = 0; b < count * std::int64_t{sizeof(Acc)}; b += 64)
                            DMLOPS_PREFETCH(from + kFoldPrefetchBytes + b);
                          add_row(sums + offset, step, columns + (col - col_first), count);
                        });
            continue;
          }
          walker.walk(tap, b_first, b_last, sum_strides, /*base_offset=*/-r0 * sum_strides[0], nothing,
                      [&](std::int64_t col, std::int64_t offset, std::int64_t step, std::int64_t count) {
                        add_row(sums + offset, step, columns + (col - col_first), count);
                      });
        }
        if (in_place) continue;
        Dims sizes = slab_sizes;  // the last slab may be shorter
        sizes[0] = r1 - r0;
        store<T, Acc>(sums, slab, sizes, out_strides);
      }
    });
  });
}

// As execute() decides for a packed output.
KernelPlan plan(const FoldDesc& desc) {
  infer_output(desc);
  const TensorView in = unbound_view(desc.input), out = unbound_view(desc.output);
  const BlockWalker walker = window_geometry("Fold", spatial_sizes(out.sizes), desc);
  const auto [in_place, prefetched] = visit_dtype(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return std::pair{fold_in_place<T, typename Sum<T>::type>(walker, out), fold_prefetches<T>(in)};
  });
  return describe(fold_tasks(in, out, fold_acc_bytes(in.dtype)), in_place, prefetched);
}

}  // namespace dmlops
