// Unfold and Fold: DML_UNFOLD_OPERATOR_DESC and DML_FOLD_OPERATOR_DESC (docs/semantics/unfold.md), i.e.
// im2col and col2im in 1 to 6 spatial dimensions.
//
// A window of window_sizes[d] taps (dilations[d] apart) slides with strides[d] over the input
// extended by start_padding[d] / end_padding[d] zeros. With D spatial dimensions S[d]:
//   Blocks[d] = (S[d] + start[d] + end[d] - dilations[d] * (window_sizes[d] - 1) - 1) / strides[d] + 1
//   K = prod(window_sizes), L = prod(Blocks)
//   unfold: {N, C, S...} -> {N, C*K, L};   fold: {N, C*K, L} -> {N, C, S...}
// Row c*K + k (k row-major over the window) and column b (row-major over Blocks) hold the
// input at p_d = b_d * strides[d] + k_d * dilations[d] - start_padding[d], or zero where some
// p_d falls in the padding. Fold is the adjoint: it adds every column entry into the position
// it was read from and drops the entries that read padding. The layout is that of
// torch.nn.functional.unfold/fold (2 spatial dims only) and ONNX Col2Im.
//
// Unfold moves bits (dispatch on element width), so every dtype is exact. Fold sums: float32
// and float64 in their own type, float16 in float32 rounded once per element, integers in
// the unsigned type of their width (wrapping, as numpy does). Each output element's terms are
// added in increasing k, whatever the thread count.
#pragma once

#include <optional>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

struct UnfoldDesc {
  TensorDesc input;                  // {N, C, S0, ..., S(D-1)}, D = 1..6
  std::optional<TensorDesc> output;  // {N, C*K, L}; inferred when absent
  // DimensionCount = D entries each (DirectML requires all five arrays).
  Dims window_sizes, strides, dilations, start_padding, end_padding;
};

struct FoldDesc {
  TensorDesc input;   // {N, C*K, L}
  TensorDesc output;  // {N, C, S0, ..., S(D-1)}: a fold's output sizes cannot be inferred
  Dims window_sizes, strides, dilations, start_padding, end_padding;
};

// Check every rule of the spec (InvalidArgument / DTypeError naming the field) and return
// the output TensorDesc (the given one, if it is right).
TensorDesc infer_output(const UnfoldDesc& desc);
TensorDesc infer_output(const FoldDesc& desc);

// Run the operator. The views must match the descriptor; `out` must be writable memory of
// distinct elements sharing nothing with `in`. All of it is checked before any write.
// DMLOPS_VERBOSE=1 logs each call's plan as one line on stderr.
void execute(const UnfoldDesc& desc, const TensorView& in, const TensorView& out);
void execute(const FoldDesc& desc, const TensorView& in, const TensorView& out);

// What execute() does on arrays laid out as the descriptor says (checks desc first). Unfold:
// algorithm "rows", tiles rows (N*C*K), pieces per row, blocks0_per_piece, grain. Fold:
// algorithm "slabs", tiles planes (N*C), slabs per plane, slab_rows, grain.
KernelPlan plan(const UnfoldDesc& desc);
KernelPlan plan(const FoldDesc& desc);

}  // namespace dmlops
