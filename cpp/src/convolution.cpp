// Convolution: validation (convolution/geometry.cpp), the geometry rewrites
// (convolution/rewrites.cpp), the choice of an algorithm from the ordered list
// (convolution/algorithms.cpp) and one file per algorithm under convolution/. This file is
// the entry: plan, log when asked, run.
#include "dmlops/ops/convolution.hpp"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "convolution/algorithms.hpp"
#include "convolution/rewrites.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/parallel.hpp"

namespace dmlops {
namespace {

using conv::kOp;

const std::string& forced_by_environment() {
  static const std::string algorithm = [] {
    const char* value = std::getenv("DMLOPS_CONVOLUTION_ALGORITHM");
    return std::string(value ? value : "");
  }();
  return algorithm;
}

struct Chosen {
  conv::Rewrite rewrite;
  const conv::Algorithm* algorithm;
  ConvolutionPlan plan;
};

// The rewrites, the algorithm and (when `describe`) its blocking: what plan_convolution reports
// and execute runs.
Chosen choose(const conv::Geometry& g, std::string_view algorithm, bool describe) {
  Chosen c{conv::rewrite(g), nullptr, {}};
  const conv::Cpu cpu = conv::Cpu::detect();
  c.algorithm = &conv::choose(c.rewrite.geometry, cpu, algorithm.empty() ? forced_by_environment() : algorithm,
                              c.plan.reason);
  c.plan.algorithm = c.algorithm->name;
  c.plan.isa = cpu.isa;
  c.plan.rewrite = c.rewrite.name();
  c.plan.threads = num_threads();
  if (describe) c.algorithm->describe(c.rewrite.geometry, c.plan);
  return c;
}

// dmlops: Convolution forward 1x64x56x56 f32 3x3 -> algorithm=direct isa=avx512 tiles=... tasks=14 threads=2 reason=...
void log(const ConvolutionDesc& desc, const conv::Geometry& g, const ConvolutionPlan& plan, bool prepared) {
  log_plan("Convolution " + std::string(name(desc.direction)) + " " + dims_text(desc.input.sizes) + " " +
               std::string(short_name(g.dtype)) + " " + dims_text(g.kernel),
           plan, prepared ? "prepared" : "");
}

}  // namespace

std::vector<std::string> convolution_algorithms() {
  std::vector<std::string> names;
  for (const conv::Algorithm* algorithm : conv::algorithms()) names.emplace_back(algorithm->name);
  return names;
}

ConvolutionPlan plan_convolution(const ConvolutionDesc& desc, std::string_view algorithm) {
  return choose(conv::analyse(desc), algorithm, true).plan;
}

namespace {

// Checks the call's views against desc (all before any write), logs when asked, and runs the
// chosen algorithm on the rewritten geometry.
void run(const ConvolutionDesc& desc, const conv::Geometry& g, const Chosen& c, const TensorView& in,
         const TensorView& filter, const TensorView* bias, const TensorView& out, const conv::PackedFilter* packed) {
  check_view_matches(in, desc.input, "Convolution: input");
  check_view_matches(filter, desc.filter, "Convolution: filter");
  if (bool(bias) != desc.bias.has_value())
    fail(kOp, ": the descriptor ", desc.bias ? "has" : "has no", " bias tensor but the call passes ", bias ? "one" : "none");
  if (bias) check_view_matches(*bias, *desc.bias, "Convolution: bias");
  if (bias) {
    check_output_view(out, g.output, "Convolution: out", {&in, &filter, bias});
  } else {
    check_output_view(out, g.output, "Convolution: out", {&in, &filter});
  }
  if (verbose()) {
    // The blocking is computed for the log only: run() computes it again, with the same functions.
    ConvolutionPlan plan = c.plan;
    plan.threads = num_threads();
    c.algorithm->describe(c.rewrite.geometry, plan);
    log(desc, g, plan, packed != nullptr);
  }
  std::vector<std::byte> buffer;
  const TensorView rewritten = conv::rewritten_input(g, c.rewrite, in, buffer);
  c.algorithm->run(desc, c.rewrite.geometry, conv::Views{rewritten, filter, bias, out, packed});
}

}  // namespace

void execute(const ConvolutionDesc& desc, const TensorView& in, const TensorView& filter, const TensorView* bias,
             const TensorView& out, std::string_view algorithm) {
  const conv::Geometry g = conv::analyse(desc);
  run(desc, g, choose(g, algorithm, false), in, filter, bias, out, nullptr);
}

struct PreparedConvolution::State {
  ConvolutionDesc desc;
  TensorView filter;
  std::optional<TensorView> bias;
  conv::Geometry g;
  Chosen chosen;
  std::optional<conv::PackedFilter> packed;
};

PreparedConvolution::PreparedConvolution(const ConvolutionDesc& desc, const TensorView& filter, const TensorView* bias,
                                         std::string_view algorithm) {
  const conv::Geometry g = conv::analyse(desc);
  check_view_matches(filter, desc.filter, "Convolution: filter");
  if (bool(bias) != desc.bias.has_value())
    fail(kOp, ": the descriptor ", desc.bias ? "has" : "has no", " bias tensor but prepare passes ", bias ? "one" : "none");
  if (bias) check_view_matches(*bias, *desc.bias, "Convolution: bias");
  state_ = std::make_unique<State>(State{desc, filter, bias ? std::optional<TensorView>(*bias) : std::nullopt, g,
                                         choose(g, algorithm, false), std::nullopt});
  const Chosen& c = state_->chosen;
  if (c.algorithm->pack) c.algorithm->pack(desc, c.rewrite.geometry, filter, state_->packed.emplace());
}

PreparedConvolution::~PreparedConvolution() = default;
PreparedConvolution::PreparedConvolution(PreparedConvolution&&) noexcept = default;
PreparedConvolution& PreparedConvolution::operator=(PreparedConvolution&&) noexcept = default;

void PreparedConvolution::operator()(const TensorView& in, const TensorView& out) const {
  const State& s = *state_;
  run(s.desc, s.g, s.chosen, in, s.filter, s.bias ? &*s.bias : nullptr, out, s.packed ? &*s.packed : nullptr);
}

ConvolutionPlan PreparedConvolution::plan() const {
  ConvolutionPlan plan = state_->chosen.plan;
  plan.threads = num_threads();
  state_->chosen.algorithm->describe(state_->chosen.rewrite.geometry, plan);
  return plan;
}

bool PreparedConvolution::packed() const { return state_->packed.has_value(); }

}  // namespace dmlops
