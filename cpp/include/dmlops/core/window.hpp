// Sliding-window geometry shared by convolution, pooling, unfold and fold.
//
// On each spatial axis a window of `window` taps spaced `dilation` apart slides with `stride`
// over the input extended by `start` and `end` padding:
//   extent = (window - 1) * dilation + 1
//   out    = (in + start + end - extent) / stride + 1          (must be >= 1)
//   tap t of output position o reads input i = o * stride + t * dilation - start
// Taps with i outside [0, in) fall in the padding. valid_taps() gives the range of taps that
// land inside, so kernels loop over it without a bounds test per tap; valid_outputs() is the
// same relation seen from a tap, for kernels that sweep one tap over a row of outputs.
#pragma once

#include <cstdint>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dmlops/core/dims.hpp"

namespace dmlops {

struct WindowAxis {
  std::int64_t in = 1, window = 1, stride = 1, dilation = 1, start = 0, end = 0;

  std::int64_t extent() const { return (window - 1) * dilation + 1; }
  std::int64_t out() const { return (in + start + end - extent()) / stride + 1; }
  std::int64_t input_index(std::int64_t o, std::int64_t t) const { return o * stride + t * dilation - start; }

  // Taps [first, last) of output position o read inside the input (first >= last: none).
  std::pair<std::int64_t, std::int64_t> valid_taps(std::int64_t o) const {
    const std::int64_t base = o * stride - start;  // input index of tap 0
    const std::int64_t first = base >= 0 ? 0 : (-base + dilation - 1) / dilation;
    const std::int64_t past = in - base;            // taps t with base + t*dilation < in
    const std::int64_t last = past <= 0 ? 0 : std::min(window, (past + dilation - 1) / dilation);
    return {first, last};
  }

  // Outputs [first, last) whose tap t reads inside the input (first >= last: none).
  std::pair<std::int64_t, std::int64_t> valid_outputs(std::int64_t t) const {
    const std::int64_t offset = t * dilation - start;  // input index of tap t at output 0
    const std::int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    const std::int64_t room = in - offset;             // outputs o with o*stride + offset < in
    const std::int64_t last = room <= 0 ? 0 : std::min(out(), (room + stride - 1) / stride);
    return {first, last};
  }
};

// The per-axis arrays of a windowed operator, as its descriptor carries them.
struct WindowParams {
  Dims window, strides, dilations, start_padding, end_padding;
};

// Checks the arrays for `op` over `spatial_rank` axes: one entry each (empty strides or
// dilations mean all 1; empty paddings all 0), window/stride/dilation >= 1, paddings >= 0,
// and that every axis has at least one output ("no window fits" otherwise). Returns the axes.
// `window_field` names the window array as the operator calls it ("window_size", "window_sizes").
std::vector<WindowAxis> window_axes(const std::string& op, const char* window_field, const Dims& spatial_in,
                                    const WindowParams& params);

}  // namespace dmlops
