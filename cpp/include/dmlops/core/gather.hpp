// Separable gather: the data-movement engine behind padding (and nearest-neighbour resampling).
//
//   out[o_0, ..., o_r-1] = in[map_0[o_0], ..., map_r-1[o_r-1]]   or `fill` where any map_a[o_a] < 0
//
// Each axis has its own map: a source index per output index, or -1 for "fill", kept as runs
// (MapRun) so that a long regular stretch costs one entry: the interior of a padded axis of ten
// million elements is one run, not eighty megabytes of indices. An empty map is the identity
// (same size in and out). Because every axis is independent, the
// kernel can reorder axes, merge identity axes, and turn the innermost map into runs (copy
// forwards, copy backwards, broadcast one element, repeat each element k times, fill), with one
// memcpy, vector fill or vector shuffle loop per run; short irregular stretches are gathered
// element by element, or with AVX2 by permuting 32-byte windows of the input row (4- and 8-byte
// elements). An output row whose input row repeats an earlier one (an outer map with
// map[o] == map[o-1]) is copied from that row instead of being gathered again. Rows are split
// across the thread pool.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "dmlops/core/dtype.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

// `length` consecutive output positions reading source index src + i * step (i < length), or
// the fill value when src < 0.
struct MapRun {
  std::int64_t length, src, step;
  friend bool operator==(const MapRun&, const MapRun&) = default;
};

// The map of one axis, as runs in output order. Built element by element with push() (which
// extends the last run while the elements continue it with step -1, 0 or +1) or a run at a time
// with push_run(); default-constructed it is the identity.
class AxisMap {
 public:
  AxisMap() = default;
  AxisMap(std::initializer_list<std::int64_t> indices);  // a literal map, e.g. {-1, 0, 1, -1}
  static AxisMap from_indices(const std::vector<std::int64_t>& indices);

  void push(std::int64_t src);  // src in [-1, input size); -1 is fill
  void push_run(std::int64_t src, std::int64_t step, std::int64_t length);

  bool is_identity() const { return runs_.empty(); }
  std::int64_t size() const { return size_; }  // output positions (0 for the identity)
  const std::vector<MapRun>& runs() const { return runs_; }
  std::vector<std::int64_t> indices() const;  // one entry per output position, -1 for fill
  friend bool operator==(const AxisMap&, const AxisMap&) = default;

 private:
  std::vector<MapRun> runs_;
  std::int64_t size_ = 0;
};

// `in` and `out` have the same dtype and rank; maps.size() == rank; a non-identity map has
// out.sizes[a] positions reading indices in [0, in.sizes[a]) or fill. `fill` must have in's
// element size.
void separable_gather(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps,
                      Scalar fill);

// What separable_gather(in, out, maps, ...) does, from the same set-up (the views' data is not
// read): algorithm "copy" (no axis remapped), "fill" (a size-1 output axis in the fill) or
// "gather" (rows of runs); tiles: rows, row (elements), column blocks when rows are split,
// row_copies when each row is gathered once and copied, the run counts of a row, grain.
KernelPlan describe_separable_gather(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps);

}  // namespace dmlops
