// Padding: DML_PADDING_OPERATOR_DESC and DML_PADDING1_OPERATOR_DESC (docs/semantics/padding.md).
//
// Output size on axis i: input.sizes[i] + start_padding[i] + end_padding[i]. Each axis maps
// an output coordinate to an input coordinate independently (padding_source_index); where
// the mode is constant and any axis lands in the padding, the element is the padding value.
// Paddings larger than the input are legal in every mode: reflection and symmetric fold
// periodically, wrap repeats. The kernel is separable_gather, so every dtype moves bit-exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dmlops/core/dtype.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

// Same order as DML_PADDING_MODE.
enum class PaddingMode : std::uint8_t { Constant, Edge, Reflection, Symmetric, Wrap };

std::string_view name(PaddingMode mode);  // "constant", "edge", ...
// Accepts the short name; throws InvalidArgument listing the valid ones.
PaddingMode parse_padding_mode(std::string_view text);

struct PaddingDesc {
  std::string op_name = "Padding1";  // "Padding" for DML_PADDING_OPERATOR_DESC; used in messages
  TensorDesc input;
  std::optional<TensorDesc> output;  // inferred when absent
  PaddingMode mode = PaddingMode::Constant;
  Scalar value;  // PaddingValueDataType + PaddingValue; dtype must equal input.dtype
  Dims start_padding;
  Dims end_padding;
};

// Checks every rule of the spec (throws InvalidArgument / DTypeError naming the field) and
// returns the output TensorDesc (the given one, if it is right).
TensorDesc infer_output(const PaddingDesc& desc);

// Runs the operator. Checks that the views match the descriptor, that `out` is writable
// memory of distinct elements that shares nothing with `in`, all before writing.
// DMLOPS_VERBOSE=1 logs each call's plan as one line on stderr.
void execute(const PaddingDesc& desc, const TensorView& in, const TensorView& out);

// What execute() does on arrays laid out as the descriptor says (checks desc first): the
// separable gather's plan (core/gather.hpp: copy, fill or gather, its rows and runs).
KernelPlan plan(const PaddingDesc& desc);

// Input coordinate read by output coordinate `o` on an axis of input size `n` with start
// padding `start`, or -1 when the element is the padding value (constant mode).
std::int64_t padding_source_index(PaddingMode mode, std::int64_t o, std::int64_t n, std::int64_t start);

}  // namespace dmlops
