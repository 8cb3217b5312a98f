// Geometry rewrites applied to a forward convolution before an algorithm is chosen: they are not
// algorithms (every algorithm runs on the rewritten geometry as on any other), but cheaper
// equivalent geometries over a copy or a view of the input.
//   compact: large strides, dilations or paddings, whose padded planes would be mostly positions
//            no output reads, become a compact copy of the positions the taps read (bit for bit).
//   sampled: a one-tap window that never reaches the padding only samples the input: a 1x1
//            stride-1 convolution of the strided view x[..., ::stride] (not for depthwise
//            layers, whose kernels read any stride directly).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "geometry.hpp"

namespace dmlops::conv {

struct Rewrite {
  Geometry geometry;                  // what the algorithms see
  std::optional<Geometry> compacted;  // after the compact rewrite, before sampling
  bool sampled = false;
  std::string name() const;  // "", "compact", "sampled" or "compact, sampled"
};

// The rewrites of g (none for a backward one); deterministic, so the plan and the call agree.
Rewrite rewrite(const Geometry& g);

// The input the rewritten geometry reads: `in` itself, a strided view of it, or a compact copy
// held in `buffer`.
TensorView rewritten_input(const Geometry& g, const Rewrite& r, const TensorView& in, std::vector<std::byte>& buffer);

}  // namespace dmlops::conv
