// The convolution algorithms as one ordered list (as oneDNN's implementation lists and XNNPACK's
// configs): a call takes the first whose applies() accepts its (rewritten) geometry, unless an
// algorithm is forced (DMLOPS_CONVOLUTION_ALGORITHM, or the `algorithm` argument of execute and
// plan_convolution), which must then apply. Adding an algorithm is a file defining its Algorithm
// and a line in the list (algorithms.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "dmlops/core/dispatch.hpp"
#include "dmlops/ops/convolution.hpp"
#include "geometry.hpp"

namespace dmlops::conv {

// What the predicates may ask of the processor: the ISA the kernels run and its vector width.
struct Cpu {
  std::string_view isa;       // kernel_isa(KernelKind::Fma): "avx512", "avx2", "sse2", "neon" or "portable"
  std::int64_t vector_bytes;  // of the vectors the kernels use (the portable code's as AVX2's)
  std::int64_t lanes(DataType dtype) const;  // of its accumulation type (float for float16)
  static Cpu detect();
};

// Whether an algorithm applies, and why (or why not), in a few words. One that applies but is not
// `preferred` computes the layer correctly, only slower than a later one: the list passes it over,
// but it can be forced (so tests reach it, and benchmarks measure where the thresholds lie).
struct Verdict {
  bool applies;
  std::string reason;
  bool preferred = true;
};

struct Algorithm {
  std::string_view name;
  Verdict (*applies)(const Geometry& g, const Cpu& cpu);
  // The tiles, blocking and task count run() will use for g on num_threads() threads: computed by
  // the same functions run() calls, so the plan cannot disagree with the run.
  void (*describe)(const Geometry& g, ConvolutionPlan& plan);
  void (*run)(const ConvolutionDesc& desc, const Geometry& g, const Views& views);
  // Packs the filter in the layout run() then reads from views.packed instead of packing it per
  // call (the same values, so the same bits); null where run() packs nothing worth keeping.
  void (*pack)(const ConvolutionDesc& desc, const Geometry& g, const TensorView& filter, PackedFilter& packed);
};

// Every algorithm, in the order they are tried.
std::span<const Algorithm* const> algorithms();

// The first algorithm that applies to g and is preferred, or `forced` (a name; empty: the list's
// choice), which must exist and apply (InvalidArgument naming it and saying why otherwise). `reason` gets the
// chosen one's verdict.
const Algorithm& choose(const Geometry& g, const Cpu& cpu, std::string_view forced, std::string& reason);

// A forward convolution with the list's choice, never a forced one: the backward phases' layers.
void run_forward(const ConvolutionDesc& desc, const Geometry& g, const Views& views);

// The algorithms (one file each).
extern const Algorithm kDepthwiseLanes, kDepthwiseRows, kDirect, kGemm, kBackwardPhases, kBackwardScatter;

}  // namespace dmlops::conv
