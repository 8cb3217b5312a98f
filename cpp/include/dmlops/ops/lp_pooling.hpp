// Lp pooling: DML_LP_POOLING_OPERATOR_DESC and DML_LP_POOLING1_OPERATOR_DESC (docs/semantics/lp_pooling.md).
//
// Input N x C x S[0] x ... x S[D-1] with D = 1, 2 or 3 spatial axes (DirectML takes 2 and 3;
// 1 is a dmlops extension). On each spatial axis a window slides as in core/window.hpp:
//   extent = (window - 1) * dilation + 1
//   out    = (in + start + end - extent) / stride + 1
//   y[n, c, o...] = ( sum over the window's taps inside the input of |x|^p )^(1/p)
// Taps in the padding contribute 0. The absolute value is a spec Decision (ONNX LpPool
// semantics): DirectML's formula omits it, which makes odd p wrong for negative inputs.
//
// Accuracy: FLOAT16 and FLOAT32 accumulate in float32 (FLOAT16 rounds once on store), FLOAT64
// in float64. p = 1 sums |x|; p = 2 takes the root of the sum of squares and recomputes, scaled,
// any output whose sum of squares overflowed or lost precision to underflow; other p divide
// every tap by the window's largest |x| before raising it to p, so no finite result overflows.
// NaN in a window gives NaN; otherwise an infinite element gives +inf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

inline constexpr std::int64_t kLpPoolingMaxP = 0xffffffff;  // P is a UINT

struct LpPoolingDesc {
  std::string op_name = "LpPooling1";  // "LpPooling" for DML_LP_POOLING_OPERATOR_DESC; used in messages
  TensorDesc input;
  std::optional<TensorDesc> output;  // inferred when absent
  // One entry per spatial axis (DimensionCount = input rank - 2), in axis order.
  Dims strides;
  Dims window_size;
  Dims start_padding;
  Dims end_padding;
  std::optional<Dims> dilations;  // LpPooling1; absent = all 1 (and always absent for LpPooling)
  std::int64_t p = 2;             // DirectML's UINT P: 1 .. 2^32 - 1
};

// Checks every rule of the spec (throws InvalidArgument / DTypeError naming the field) and
// returns the output TensorDesc (the given one, if it is right).
TensorDesc infer_output(const LpPoolingDesc& desc);

// Runs the operator. Checks that the views match the descriptor, that `out` is writable
// memory of distinct elements that shares nothing with `in`, all before writing.
// DMLOPS_VERBOSE=1 logs each call's plan as one line on stderr.
void execute(const LpPoolingDesc& desc, const TensorView& in, const TensorView& out);

// What execute() does on arrays laid out as the descriptor says (checks desc first): algorithm
// sum_abs (p = 1), sum_squares (p = 2) or sum_powers (p >= 3); tiles: rows (output rows along
// W), blocks per row, block (outputs), span (input columns a block reads), outer_taps (input
// rows a window folds), grain.
KernelPlan plan(const LpPoolingDesc& desc);

}  // namespace dmlops
