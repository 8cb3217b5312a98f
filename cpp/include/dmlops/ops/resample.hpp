// Upsample2D and Resample: DML_UPSAMPLE_2D_OPERATOR_DESC and DML_RESAMPLE_OPERATOR_DESC,
// DML_RESAMPLE1/2/3_OPERATOR_DESC (docs/semantics/resample.md).
//
// Every axis maps an output coordinate o to a fractional input coordinate
//   x = (o - output_pixel_offset) / scale - input_pixel_offset          (float64)
// nearest_neighbor rounds x (RESAMPLE/RESAMPLE1: floor(x + 0.5); RESAMPLE2/3: floor(x) for
// rounding direction DECREASING, ceil(x) for INCREASING) and clamps it into the input; linear
// blends the two clamped neighbours of x on every axis whose table is not the identity;
// antialiased linear (RESAMPLE3) widens the blend to a triangle filter of half-width 1/scale when
// scale < 1 (ONNX Resize antialias=1). Upsample2D is Resample with scales {1, 1, [1,] sh, sw} and
// the default offsets 0.5 / -0.5, run by the same code.
//
// The per-axis index or weight tables are built once per call; nearest_neighbor is one
// separable_gather (bit-exact for every dtype), linear one separable_filter (float16/32/64).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

// Same order as DML_INTERPOLATION_MODE.
enum class InterpolationMode : std::uint8_t { NearestNeighbor, Linear };
// Same order as DML_AXIS_DIRECTION.
enum class AxisDirection : std::uint8_t { Increasing, Decreasing };

std::string_view name(InterpolationMode mode);  // "nearest_neighbor", "linear"
std::string_view name(AxisDirection direction);  // "increasing", "decreasing"
// Accept the short names; throw InvalidArgument listing the valid ones.
InterpolationMode parse_interpolation_mode(std::string_view text);
AxisDirection parse_axis_direction(std::string_view text);

struct ResampleDesc {
  // "Resample", "Resample1", "Resample2" or "Resample3": the struct this mirrors; used in messages.
  std::string op_name = "Resample3";
  TensorDesc input;
  std::optional<TensorDesc> output;  // inferred when absent: see resample_output_size
  InterpolationMode mode = InterpolationMode::NearestNeighbor;
  // RESAMPLE2/3. Absent: RESAMPLE/RESAMPLE1's nearest rule, floor(x + 0.5).
  std::optional<AxisDirection> rounding_direction;
  std::vector<float> scales;                // FLOAT, one per dimension, > 0
  std::vector<float> input_pixel_offsets;   // FLOAT, one per dimension; empty: 0.5 each (RESAMPLE)
  std::vector<float> output_pixel_offsets;  // FLOAT, one per dimension; empty: -0.5 each (RESAMPLE)
  bool antialiased = false;                 // RESAMPLE3; only linear downsampling changes
  // Not DirectML's: linear interpolation's passes over the resampled axes in this order (axes
  // that are copied are skipped; every resampled axis once); empty: the cheapest order. Each
  // pass rounds, so a part of an array resampled in the whole array's order has the whole
  // call's bits (dmlops.dask). Nearest neighbour ignores it.
  std::vector<std::int64_t> pass_order;
};

struct Upsample2DDesc {
  TensorDesc input;  // {N, C, H, W} or {N, C, D, H, W}
  std::optional<TensorDesc> output;  // inferred when absent: {N, C, [D,] H * scale_height, W * scale_width}
  std::int64_t scale_height = 1;     // ScaleSize.Height, >= 1
  std::int64_t scale_width = 1;      // ScaleSize.Width, >= 1
  InterpolationMode mode = InterpolationMode::NearestNeighbor;
};

// Check every rule of the spec (InvalidArgument / DTypeError naming the field) and return the
// output TensorDesc (the given one, if it is right).
TensorDesc infer_output(const ResampleDesc& desc);
TensorDesc infer_output(const Upsample2DDesc& desc);

// Run the operator. Check that the views match the descriptor, that `out` is writable memory
// of distinct elements that shares nothing with `in`, all before writing.
// DMLOPS_VERBOSE=1 logs each call's plan as one line on stderr.
void execute(const ResampleDesc& desc, const TensorView& in, const TensorView& out);
void execute(const Upsample2DDesc& desc, const TensorView& in, const TensorView& out);

// What execute() does on arrays laid out as the descriptor says (checks desc first):
// nearest_neighbor, the separable gather's plan (core/gather.hpp: gather, with row_copies where
// an integer scale repeats whole rows; copy when every axis maps onto itself); linear, the
// separable filter's (core/filter.hpp: its pass order and tiles).
KernelPlan plan(const ResampleDesc& desc);
KernelPlan plan(const Upsample2DDesc& desc);

// Output size of an axis when none is given: floor(in * scale). A product within float32
// rounding (relative 2^-24) below an integer counts as that integer, so 10 x 0.7 is 7 although
// the FLOAT 0.7 is 0.699999988. Throws when the size is below 1 or above 2^48.
std::int64_t resample_output_size(const std::string& op, int axis, std::int64_t in, double scale);

}  // namespace dmlops
