#include "algorithms.hpp"

#include <iterator>
#include <vector>

#include "dmlops/core/cpu.hpp"
#include "dmlops/core/error.hpp"
#include "rewrites.hpp"

namespace dmlops::conv {
namespace {

// The list: forward algorithms, then backward ones, each before the more general ones that
// would also apply (gemm and backward_scatter apply to every layer of their direction).
constexpr const Algorithm* kAlgorithms[] = {
    &kDepthwiseLanes, &kDepthwiseRows, &kDirect, &kGemm, &kBackwardPhases, &kBackwardScatter,
};

}  // namespace

Cpu Cpu::detect() {
  // simd_lanes: the portable vectors are AVX2's width
  return {kernel_isa(KernelKind::Fma), avx512_enabled() ? 64 : 32};
}

std::int64_t Cpu::lanes(DataType dtype) const { return vector_bytes / (dtype == DataType::Float64 ? 8 : 4); }

std::span<const Algorithm* const> algorithms() { return kAlgorithms; }

const Algorithm& choose(const Geometry& g, const Cpu& cpu, std::string_view forced, std::string& reason) {
  if (!forced.empty()) {
    for (const Algorithm* algorithm : kAlgorithms) {
      if (algorithm->name != forced) continue;
      Verdict verdict = algorithm->applies(g, cpu);
      if (!verdict.applies) fail(kOp, ": the algorithm '", forced, "' does not apply to this layer: ", verdict.reason);
      reason = "forced (" + verdict.reason + ")";
      return *algorithm;
    }
    std::string names;
    for (const Algorithm* algorithm : kAlgorithms) {
      if (!names.empty()) names += ", ";
      names += algorithm->name;
    }
    fail(kOp, ": the algorithm '", forced, "' is unknown; expected one of ", names);
  }
  for (const Algorithm* algorithm : kAlgorithms) {
    Verdict verdict = algorithm->applies(g, cpu);
    if (verdict.applies && verdict.preferred) {
      reason = std::move(verdict.reason);
      return *algorithm;
    }
  }
  fail(kOp, ": no algorithm applies");  // unreachable: gemm and backward_scatter take any layer
}

void run_forward(const ConvolutionDesc& desc, const Geometry& g, const Views& views) {
  const Rewrite r = rewrite(g);
  std::vector<std::byte> buffer;
  const TensorView in = rewritten_input(g, r, views.in, buffer);
  std::string reason;
  choose(r.geometry, Cpu::detect(), {}, reason).run(desc, r.geometry, Views{in, views.filter, views.bias, views.out});
}

}  // namespace dmlops::conv
