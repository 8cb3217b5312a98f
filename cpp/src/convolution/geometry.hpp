// Convolution internals: the geometry every algorithm reads, derived once from a validated
// descriptor (the rules of docs/semantics/convolution.md), and the views a call passes.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "dmlops/core/dims.hpp"
#include "dmlops/core/dtype.hpp"
#include "dmlops/core/half.hpp"
#include "dmlops/core/platform.hpp"
#include "dmlops/core/tensor.hpp"
#include "dmlops/ops/convolution.hpp"

namespace dmlops::conv {

inline constexpr const char* kOp = "Convolution";

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

inline Dims spatial(const Dims& sizes) { return Dims(sizes.begin() + 2, sizes.end()); }

template <class T>
struct AccumulatorOf {
  using type = T;
};
template <>
struct AccumulatorOf<Half> {
  using type = float;
};

// Everything an algorithm needs, derived once from a validated descriptor. The geometry
// rewrites (rewrites.hpp) and the backward phases make others, for the same kernels.
struct Geometry {
  DataType dtype = DataType::Float32;
  ConvolutionDirection direction = ConvolutionDirection::Forward;
  int D = 0;
  std::int64_t batch = 0, in_channels = 0, out_channels = 0, groups = 1;
  std::int64_t in_per_group = 0, out_per_group = 0;
  Dims in_spatial, out_spatial, kernel, extent;  // extent: (kernel - 1) * dilation + 1
  Dims strides, dilations, start, end, output_padding;
  TensorDesc output;
};

// Checks every rule of the spec (InvalidArgument / DTypeError naming the field).
Geometry analyse(const ConvolutionDesc& desc);

// A filter packed once, in the layout an algorithm's run() reads (Algorithm::pack).
struct PackedFilter {
  template <class Acc>
  using Values = std::vector<Acc, platform::VectorAllocator<Acc>>;  // read whole on every call
  Values<float> f32;
  Values<double> f64;
  template <class Acc>
  Values<Acc>& values() {
    if constexpr (std::is_same_v<Acc, double>) {
      return f64;
    } else {
      return f32;
    }
  }
  template <class Acc>
  const Acc* data() const {
    return const_cast<PackedFilter*>(this)->values<Acc>().data();
  }
};

// The tensors of one call, matching a geometry; `packed`: the filter packed already.
struct Views {
  const TensorView& in;
  const TensorView& filter;
  const TensorView* bias;
  const TensorView& out;
  const PackedFilter* packed = nullptr;
};

}  // namespace dmlops::conv
