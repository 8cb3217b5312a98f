#include "dmlops/core/gather.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "dmlops/core/dispatch.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/parallel.hpp"
#include "dmlops/core/rows.hpp"
#include "dmlops/core/strided.hpp"

namespace dmlops {
namespace {

constexpr std::int64_t kFillOffset = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kBytesPerTask = 32 * 1024;  // below this, splitting costs more than it saves
constexpr std::int64_t kMaxColumnBlockBytes = 64 * 1024;

// A stretch of the inner output row read with one step: src_step +1 (copy), -1 (mirror),
// 0 (broadcast one element), or src_index -1 (fill).
struct Run {
  std::int64_t out_begin, length, src_index, src_step;
};

std::vector<Run> compile_runs(const AxisMap& map, std::int64_t size) {
  if (map.empty()) return {Run{0, size, 0, 1}};
  std::vector<Run> runs;
  for (std::int64_t o = 0; o < size;) {
    const std::int64_t s = map[o];
    std::int64_t e = o + 1;
    std::int64_t step = 1;
    if (s < 0) {
      while (e < size && map[e] < 0) ++e;
    } else if (e < size && map[e] >= 0 && std::llabs(map[e] - s) <= 1) {
      step = map[e] - s;
      while (e < size && map[e] >= 0 && map[e] - map[e - 1] == step) ++e;
    }
    runs.push_back(Run{o, e - o, s, step});
    o = e;
  }
  return runs;
}

// Everything the row loop needs, computed once per call.
struct Plan {
  std::byte* out = nullptr;
  const std::byte* in = nullptr;
  int outer_rank = 0;
  Dims outer_sizes;
  std::array<std::int64_t, kMaxRank> out_stride{}, in_stride{};
  std::array<std::vector<std::int64_t>, kMaxRank> in_offsets;  // byte offsets; empty = identity
  std::int64_t inner_size = 1, inner_out_stride = 0, inner_in_stride = 0;
  std::vector<Run> runs;
  std::int64_t columns_per_block = 1, column_blocks = 1;
};

// Output and input addresses of successive rows, updated incrementally from the outermost
// changed dimension.
class RowCursor {
 public:
  RowCursor(const Plan& plan, std::int64_t row) : plan_(plan), counter_(plan.outer_sizes, row) { update(0); }
  void next() { update(counter_.next()); }
  std::byte* out() const { return plan_.out + (plan_.outer_rank ? out_[plan_.outer_rank - 1] : 0); }
  const std::byte* in() const { return plan_.in + (plan_.outer_rank ? in_[plan_.outer_rank - 1] : 0); }
  bool fill() const { return plan_.outer_rank && fill_[plan_.outer_rank - 1]; }

 private:
  void update(int from) {
    for (int d = std::max(from, 0); d < plan_.outer_rank; ++d) {
      const std::int64_t o = counter_[d];
      const auto& offsets = plan_.in_offsets[d];
      const std::int64_t in = offsets.empty() ? o * plan_.in_stride[d] : offsets[o];
      const bool fill = (d && fill_[d - 1]) || in == kFillOffset;
      fill_[d] = fill;
      in_[d] = (d ? in_[d - 1] : 0) + (fill ? 0 : in);
      out_[d] = (d ? out_[d - 1] : 0) + o * plan_.out_stride[d];
    }
  }
  const Plan& plan_;
  NdCounter counter_;
  std::array<std::int64_t, kMaxRank> out_{}, in_{};
  std::array<bool, kMaxRank> fill_{};
};

template <class T>
void run_rows(const Plan& plan, T fill_value, std::int64_t task_begin, std::int64_t task_end) {
  RowCursor cursor(plan, task_begin / plan.column_blocks);
  std::int64_t row = task_begin / plan.column_blocks;
  for (std::int64_t task = task_begin; task < task_end; ++task) {
    const std::int64_t task_row = task / plan.column_blocks;
    for (; row < task_row; ++row) cursor.next();
    const std::int64_t c0 = (task % plan.column_blocks) * plan.columns_per_block;
    const std::int64_t c1 = std::min(plan.inner_size, c0 + plan.columns_per_block);
    std::byte* out = cursor.out();
    if (cursor.fill()) {
      fill_row<T>(out + c0 * plan.inner_out_stride, plan.inner_out_stride, fill_value, c1 - c0);
      continue;
    }
    for (const Run& run : plan.runs) {
      const std::int64_t b = std::max(c0, run.out_begin);
      const std::int64_t e = std::min(c1, run.out_begin + run.length);
      if (b >= e) continue;
      std::byte* dst = out + b * plan.inner_out_stride;
      if (run.src_index < 0) {
        fill_row<T>(dst, plan.inner_out_stride, fill_value, e - b);
      } else {
        const std::int64_t src_index = run.src_index + (b - run.out_begin) * run.src_step;
        copy_row<T>(dst, plan.inner_out_stride, cursor.in() + src_index * plan.inner_in_stride,
                run.src_step * plan.inner_in_stride, e - b);
      }
    }
  }
}

}  // namespace

void separable_gather(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps,
                      Scalar fill_value) {
  const int rank = out.sizes.size();
  if (in.sizes.size() != rank || static_cast<int>(maps.size()) != rank)
    fail("separable_gather: input rank ", in.sizes.size(), ", output rank ", rank, ", ", maps.size(), " maps");
  if (element_size(in.dtype) != element_size(out.dtype) || element_size(fill_value.dtype) != element_size(out.dtype))
    fail<DTypeError>("separable_gather: input, output and fill value differ in element size");

  Plan plan;
  plan.out = static_cast<std::byte*>(out.data);
  plan.in = static_cast<const std::byte*>(in.data);
  // Axes whose map is the identity can be merged with their neighbours; a size-1 output axis
  // reads one fixed input index, folded into the input base address.
  std::uint32_t pinned = 0;
  bool all_fill = false;
  for (int a = 0; a < rank; ++a) {
    const AxisMap& map = maps[a];
    if (map.empty()) {
      if (in.sizes[a] != out.sizes[a]) fail("separable_gather: identity map on axis ", a, " of different sizes");
      continue;
    }
    if (static_cast<std::int64_t>(map.size()) != out.sizes[a])
      fail("separable_gather: map ", a, " has ", map.size(), " entries for output size ", out.sizes[a]);
    for (std::int64_t s : map) {
      if (s < -1 || s >= in.sizes[a]) fail("separable_gather: map ", a, " reads index ", s, " of ", in.sizes[a]);
    }
    if (out.sizes[a] == 1) {
      if (map[0] < 0) all_fill = true;
      else plan.in += map[0] * in.byte_strides[a];
      continue;
    }
    bool identity = in.sizes[a] == out.sizes[a];
    for (std::int64_t o = 0; identity && o < out.sizes[a]; ++o) identity = map[o] == o;
    if (!identity) pinned |= 1u << a;
  }

  StridedLayout<2> layout(out.sizes, {out.byte_strides, in.byte_strides});
  layout.sort_by_stride(0);  // write the output in memory order
  layout.coalesce(pinned);
  const int r = layout.rank();
  if (r > 0) {
    const int inner = r - 1;
    plan.inner_size = layout.size(inner);
    plan.inner_out_stride = layout.stride(0, inner);
    plan.inner_in_stride = layout.stride(1, inner);
    const bool inner_pinned = (pinned >> layout.source_axis(inner)) & 1u;
    plan.runs = compile_runs(inner_pinned ? maps[layout.source_axis(inner)] : AxisMap{}, plan.inner_size);
  } else {
    plan.runs = compile_runs(AxisMap{}, 1);
  }
  plan.outer_rank = std::max(r - 1, 0);
  for (int d = 0; d < plan.outer_rank; ++d) {
    plan.outer_sizes.push_back(layout.size(d));
    plan.out_stride[d] = layout.stride(0, d);
    plan.in_stride[d] = layout.stride(1, d);
    if ((pinned >> layout.source_axis(d)) & 1u) {
      for (std::int64_t s : maps[layout.source_axis(d)])
        plan.in_offsets[d].push_back(s < 0 ? kFillOffset : s * plan.in_stride[d]);
    }
  }
  if (all_fill) plan.runs = {Run{0, plan.inner_size, -1, 0}};

  // Tasks are (row, column block); rows are split into column blocks only when there are too
  // few rows to keep every thread busy.
  const std::int64_t elem = static_cast<std::int64_t>(element_size(out.dtype));
  const std::int64_t rows = plan.outer_sizes.product();
  const std::int64_t row_bytes = plan.inner_size * elem;
  plan.columns_per_block = plan.inner_size;
  if (rows < 4 * num_threads() && row_bytes > kMaxColumnBlockBytes) {
    plan.columns_per_block = kMaxColumnBlockBytes / elem;
    plan.column_blocks = (plan.inner_size + plan.columns_per_block - 1) / plan.columns_per_block;
  }
  const std::int64_t task_bytes = plan.columns_per_block * elem;
  const std::int64_t grain = std::max<std::int64_t>(1, kBytesPerTask / task_bytes);

  visit_width(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T value;
    std::memcpy(&value, &fill_value.bits, sizeof(T));
    parallel_for(0, rows * plan.column_blocks, grain,
                 [&](std::int64_t begin, std::int64_t end) { run_rows<T>(plan, value, begin, end); });
  });
}

}  // namespace dmlops
