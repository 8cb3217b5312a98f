// Convolution: validation (convolution/geometry.cpp), the geometry rewrites
// (convolution/rewrites.cpp), the choice of an algorithm from the ordered list
// (convolution/algorithms.cpp) and one file per algorithm under convolution/. This file is
// the entry: plan, log when asked, run.
#include "dmlops/ops/convolution.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "convolution/algorithms.hpp"
#include "convolution/rewrites.hpp"
#include "dmlops/core/error.hpp"
#include "dmlops/core/parallel.hpp"

namespace dmlops {
namespace {

using conv::kOp;

std::string environment(const char* variable) {
  const char* value = std::getenv(variable);
  return value ? value : "";
}

const std::string& forced_by_environment() {
  static const std::string algorithm = environment("DMLOPS_CONVOLUTION_ALGORITHM");
  return algorithm;
}

bool verbose() {
  static const bool on = [] {
    const std::string value = environment("DMLOPS_VERBOSE");
    return !value.empty() && value != "0";
  }();
  return on;
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

std::string dims_text(const Dims& sizes) {
  std::string text;
  for (std::int64_t s : sizes) text += (text.empty() ? "" : "x") + std::to_string(s);
  return text;
}

// dmlops: convolution forward 1x64x56x56 f32 3x3 -> algorithm=direct isa=avx512 tiles=... tasks=14 threads=2 reason=...
void log(const ConvolutionDesc& desc, const conv::Geometry& g, const ConvolutionPlan& plan) {
  const char* dtype = g.dtype == DataType::Float16 ? "f16" : g.dtype == DataType::Float64 ? "f64" : "f32";
  std::string tiles;
  for (const auto& [name, value] : plan.tiles) tiles += (tiles.empty() ? "" : ",") + name + ":" + std::to_string(value);
  std::string line = "dmlops: convolution " + std::string(name(desc.direction)) + " " + dims_text(desc.input.sizes) +
                     " " + dtype + " " + dims_text(g.kernel) + " -> algorithm=" + plan.algorithm + " isa=" + plan.isa +
                     (plan.rewrite.empty() ? "" : " rewrite=" + plan.rewrite) + " tiles=" + tiles +
                     " tasks=" + std::to_string(plan.tasks) + " threads=" + std::to_string(plan.threads) +
                     " reason=" + plan.reason + "\n";
  std::fputs(line.c_str(), stderr);  // one call: lines of concurrent calls do not interleave
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

void execute(const ConvolutionDesc& desc, const TensorView& in, const TensorView& filter, const TensorView* bias,
             const TensorView& out, std::string_view algorithm) {
  const conv::Geometry g = conv::analyse(desc);
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
  // The blocking is computed for the log only: run() computes it again, with the same functions.
  const Chosen c = choose(g, algorithm, verbose());
  if (verbose()) log(desc, g, c.plan);
  std::vector<std::byte> buffer;
  const TensorView rewritten = conv::rewritten_input(g, c.rewrite, in, buffer);
  c.algorithm->run(desc, c.rewrite.geometry, conv::Views{rewritten, filter, bias, out});
}

}  // namespace dmlops
