// Separable filter: the arithmetic engine behind linear and antialiased resampling.
//
//   out[o_0, ..., o_r-1] = sum over t_a of  prod_a w_a(o_a, t_a) * in[first_a(o_a) + t_0, ...]
//
// Each axis has its own banded matrix: output index o reads the input indices first[o],
// first[o] + 1, ... with one weight each. An axis with an empty AxisFilter is the identity (same
// size in and out). Because the weights factor, the kernel applies one axis at a time: a pass
// over an axis that is innermost in memory filters along each row ("horizontal"), any other
// pass blends whole rows ("vertical", vectorised). The output is cut into tiles, one task
// each, so the intermediate results of a tile stay in cache; passes run in order of growing
// size (axes that shrink first), and the last pass writes the output directly.
//
// Arithmetic: float for FLOAT16 and FLOAT32, double for FLOAT64; every pass rounds to that
// precision, FLOAT16 is rounded once, on the final store. Taps are summed in their listed
// order, so results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

struct AxisFilter {
  // Output index o reads input indices first[o] + t for t < taps(o), with weights
  // weights[begin[o] + t]. Empty vectors: the identity.
  std::vector<std::int64_t> first;  // one per output index
  std::vector<std::int64_t> begin;  // one per output index, plus the end of the last
  std::vector<double> weights;

  bool identity() const { return first.empty(); }
  std::int64_t size() const { return static_cast<std::int64_t>(first.size()); }
  std::int64_t taps(std::int64_t o) const { return begin[o + 1] - begin[o]; }
  // Appends output index size() with these taps.
  void push(std::int64_t first_index, const std::vector<double>& tap_weights);
};

// `in` and `out` have the same floating dtype and rank; axes.size() == rank; a non-identity
// axis has out.sizes[a] outputs, each with at least one tap, all inside [0, in.sizes[a]).
// `order`, when not empty, fixes the order of the passes: the filtered axes in the order they
// appear in it (identity axes it lists are skipped; every filtered axis must appear, once).
// Since every pass rounds, a part of a larger array filtered in the larger call's order gives
// that call's bits (dmlops.dask cuts arrays into chunks so); else the cheapest order runs.
void separable_filter(const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes,
                      const std::vector<int>& order = {});

// What separable_filter(in, out, axes) does, from the same set-up (the views' data is not read):
// algorithm "filter" with tiles pass1, pass2, ... (the axes in pass order), block<axis> (outputs
// per tile along each filtered axis), tile (its elements) and grain; with no axis filtered, the
// strided copy's plan (describe_separable_gather).
KernelPlan describe_separable_filter(const TensorView& in, const TensorView& out, const std::vector<AxisFilter>& axes,
                                     const std::vector<int>& order = {});

}  // namespace dmlops
