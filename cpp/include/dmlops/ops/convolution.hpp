// Convolution: DML_CONVOLUTION_OPERATOR_DESC (docs/semantics/convolution.md), in 1 to 3 spatial dimensions.
//
// FORWARD, tensors {N, C, S...}, filter {OutC, InC/G, K...}:
//   Out[a] = (In[a] + start[a] + end[a] - ((K[a]-1)*dil[a] + 1)) / stride[a] + 1
//   y[n,oc,o] = bias[oc] + sum_{ic' < InC/G, t} x[n, g*(InC/G)+ic', o*stride + t*dil - start] * W[oc, ic', t']
// BACKWARD (transposed; the adjoint of FORWARD), filter {InC, OutC/G, K...}:
//   y[n, g*(OutC/G)+oc', i*stride + t*dil - start] += x[n, ic, i] * W[ic, oc', t']   (inside the output)
// where g is the group, t' = t (cross_correlation) or K-1-t (convolution: the kernel flipped on
// every spatial axis), terms outside the input / output are dropped, then the bias is added
// and the fused activation applied. BACKWARD's output sizes are whatever the output tensor
// says (any size >= 1); absent, they are the nominal
//   (In[a]-1)*stride[a] + (K[a]-1)*dil[a] + 1 - start[a] - end[a] + output_padding[a].
//
// Arithmetic: FLOAT32 in float, FLOAT64 in double, FLOAT16 in float rounded once on store.
// Each output element's sum has one fixed order whatever the thread count (threads never split
// a reduction), so results are deterministic.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dmlops/core/activation.hpp"
#include "dmlops/core/dims.hpp"
#include "dmlops/core/plan.hpp"
#include "dmlops/core/tensor.hpp"

namespace dmlops {

// Same order as DML_CONVOLUTION_MODE / DML_CONVOLUTION_DIRECTION.
enum class ConvolutionMode : std::uint8_t { Convolution, CrossCorrelation };
enum class ConvolutionDirection : std::uint8_t { Forward, Backward };

std::string_view name(ConvolutionMode mode);            // "convolution", "cross_correlation"
std::string_view name(ConvolutionDirection direction);  // "forward", "backward"
// Accept the short names; InvalidArgument listing the valid ones.
ConvolutionMode parse_convolution_mode(std::string_view text);
ConvolutionDirection parse_convolution_direction(std::string_view text);

struct ConvolutionDesc {
  TensorDesc input;                  // {N, InC, S...}, 1 to 3 spatial dimensions; FLOAT16/32/64
  TensorDesc filter;                 // FORWARD {OutC, InC/G, K...}; BACKWARD {InC, OutC/G, K...}
  std::optional<TensorDesc> bias;    // {1, OutC, 1...}
  std::optional<TensorDesc> output;  // {N, OutC, Out...}; inferred when absent
  ConvolutionMode mode = ConvolutionMode::CrossCorrelation;
  ConvolutionDirection direction = ConvolutionDirection::Forward;
  // DimensionCount entries each; empty means all 1 (strides, dilations) or all 0 (paddings).
  Dims strides, dilations, start_padding, end_padding, output_padding;
  std::int64_t group_count = 1;
  std::optional<FusedActivation> fused_activation;
};

// Checks every rule of the spec (InvalidArgument / DTypeError naming the field) and returns
// the output TensorDesc (the given one, if it is right).
TensorDesc infer_output(const ConvolutionDesc& desc);

// How a call computes: the first algorithm of an ordered list (cpp/src/convolution/algorithms.cpp)
// that applies to the layer, after the geometry rewrites (compact, sampled) that are not
// algorithms. A name in `algorithm` (else in DMLOPS_CONVOLUTION_ALGORITHM, read once) forces one,
// which must apply (InvalidArgument naming it and saying why otherwise).
// algorithm: depthwise_lanes, depthwise_rows, direct, gemm, backward_phases, backward_scatter;
// reason: why it applies (first in the list), or "forced (...)"; rewrite: "", "compact", "sampled"
// or "compact, sampled"; tiles: the algorithm's tiles and blocking; tasks: of its main parallel
// loop (backward_phases: its phases, one after the other).
using ConvolutionPlan = KernelPlan;

// The algorithm names in the order the list tries them.
std::vector<std::string> convolution_algorithms();

// The plan execute() follows for desc on the calling thread's thread count (checks desc first).
ConvolutionPlan plan_convolution(const ConvolutionDesc& desc, std::string_view algorithm = {});

// Runs the operator. The views must match the descriptor (bias present exactly when the
// descriptor has one); `out` must be writable distinct elements sharing nothing with the
// inputs. All of it is checked before any write. DMLOPS_VERBOSE=1 (read once) logs each call's
// plan as one line on stderr.
void execute(const ConvolutionDesc& desc, const TensorView& in, const TensorView& filter, const TensorView* bias,
             const TensorView& out, std::string_view algorithm = {});

// A convolution whose filter (and bias) are fixed: the algorithm is chosen, and the filter packed
// in its layout (gemm, direct; the others pack nothing worth keeping), once, so that each call
// skips that work. Bit-identical to execute() with the same arrays. The filter and bias views
// must stay valid and unchanged while it is used (the Python layer hands it copies).
class PreparedConvolution {
 public:
  PreparedConvolution(const ConvolutionDesc& desc, const TensorView& filter, const TensorView* bias,
                      std::string_view algorithm = {});
  ~PreparedConvolution();
  PreparedConvolution(PreparedConvolution&&) noexcept;
  PreparedConvolution& operator=(PreparedConvolution&&) noexcept;

  // execute(desc, in, filter, bias, out) with the views given at construction.
  void operator()(const TensorView& in, const TensorView& out) const;
  // The plan the calls follow (with the calling thread's thread count).
  ConvolutionPlan plan() const;
  // Whether the filter was packed at construction (the algorithm has a packed layout).
  bool packed() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dmlops
