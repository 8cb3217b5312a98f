// Separable gather: the data-movement engine behind padding (and nearest-neighbour resampling).
//
//   out[o_0, ..., o_r-1] = in[map_0[o_0], ..., map_r-1[o_r-1]]   or `fill` where any map_a[o_a] < 0
//
// Each axis has its own map: a source index per output index, or -1 for "fill". An axis whose
// map is empty is the identity (same size in and out). Because every axis is independent, the
// kernel can reorder axes, merge identity axes, and turn the innermost map into runs (copy
// forwards, copy backwards, broadcast one element, repeat each element k times, fill), with one
// memcpy, vector fill or vector shuffle loop per run; short irregular stretches are gathered
// element by element, or with AVX2 by permuting 32-byte windows of the input row (4- and 8-byte
// elements). An output row whose input row repeats an earlier one (an outer map with
// map[o] == map[o-1]) is copied from that row instead of being gathered again. Rows are split
// across the thread pool.
#pragma once

#include <cstdint>
#include <vector>

#include "dmlops/core/dtype.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

using AxisMap = std::vector<std::int64_t>;

// `in` and `out` have the same dtype and rank; maps.size() == rank; a non-empty map has
// out.sizes[a] entries in [-1, in.sizes[a]). `fill` must have in's element size.
void separable_gather(const TensorView& in, const TensorView& out, const std::vector<AxisMap>& maps,
                      Scalar fill);

}  // namespace dmlops
